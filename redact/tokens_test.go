package redact_test

import (
	"encoding/json"
	"testing"

	"github.com/e2a-pipeline/pipeline/redact"
)

// llmTokenParams are parameters of vLLM, OpenAI, llama.cpp, Ollama,
// Hugging Face (TGI, transformers' generation config), Anthropic and
// Gemini whose names count or name LLM tokens, with values as those APIs
// take or report them: none is a secret, and each must reach an
// OpenAI-compatible server unchanged.
var llmTokenParams = []string{
	`{"stop_token_ids":[128001,128009]}`, `{"eos_token_id":2}`, `{"eos_token_id":[1,107]}`, `{"pad_token_id":0}`,
	`{"bos_token_id":1}`, `{"decoder_start_token_id":0}`, `{"forced_eos_token_id":2}`, `{"forced_bos_token_id":0}`,
	`{"prompt_token_ids":[1,15043,3186]}`, `{"allowed_token_ids":[5,6,7]}`, `{"return_tokens_as_token_ids":true}`,
	`{"token_ids":[1,2]}`, `{"tokenIds":[3]}`, `{"token_id":42}`, `{"tokenId":42}`, `{"bad_words_ids":[[1,2],[3]]}`,
	`{"token_logprobs":[-0.1,-2.3]}`, `{"top_logprobs":5}`, `{"logprobs":true}`, `{"prompt_logprobs":1}`,
	`{"max_tokens":256}`, `{"max_completion_tokens":512}`, `{"max_new_tokens":64}`, `{"min_new_tokens":1}`,
	`{"min_tokens":1}`, `{"max_output_tokens":100}`, `{"maxOutputTokens":100}`, `{"truncate_prompt_tokens":2048}`,
	`{"token_count":12}`, `{"num_tokens":7}`, `{"n_tokens":7}`, `{"tokens_used":30}`, `{"tokens":[1,2,3]}`,
	`{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0},` +
		`"completion_tokens_details":{"reasoning_tokens":4,"accepted_prediction_tokens":0}}}`,
	`{"usage.total_tokens":3}`, `{"candidatesTokenCount":3}`, `{"totalTokenCount":3}`, `{"budget_tokens":1024}`,
	`{"thinking":{"type":"enabled","budget_tokens":1024}}`, `{"cache_read_input_tokens":0}`, `{"top_n_tokens":5}`,
	`{"suppress_tokens":[220,50256]}`, `{"skip_special_tokens":false}`, `{"n_probs":3,"n_predict":128,"n_keep":-1}`,
	`{"num_predict":128,"num_ctx":4096,"eval_count":9,"prompt_eval_count":4}`, `{"logit_bias":{"50256":-100}}`,
	`{"timings":{"prompt_per_token_ms":1.5,"predicted_per_token_ms":20.1,"predicted_per_second":49.7}}`,
	`{"input_cost_per_token":0.000003,"output_cost_per_token":0.000015}`,
	`{"generation_config":{"eos_token_id":[2,32000],"pad_token_id":32000}}`,
	`{"env":[{"name":"EOS_TOKEN_ID","value":2}],"pairs":[["stop_token_ids",[1,2]]]}`,
	// not tokens, but kept the same way: Gemini's thought signature
	`{"tool_calls":[{"id":"c1","extra_content":{"google":{"thought_signature":"Cs4BAVSoXO"}}}]}`,
	`{"parts":[{"functionCall":{"name":"f"},"thoughtSignature":"Cs4BAVSoXO"}]}`,
	// the same numbers written in strings: command lines (vLLM's and
	// transformers' flags, env assignments), curl's form data, URL queries,
	// header lines and env values, which are strings
	`{"args":["--eos-token-id","2","--pad-token-id=0","--bos_token_id","1","--max-tokens=512","--max-new-tokens","64"]}`,
	`{"args":["--stop-token-ids","128001,128009","--forced-eos-token-id=-1","--token-logprobs=-0.25"]}`,
	`{"args":["EOS_TOKEN_ID=2","STOP_TOKEN_IDS=1,2","PAD_TOKEN_ID: 0"]}`,
	`{"args":["curl","-d","max_tokens=512&eos_token_id=2","-d","prompt=hi&stop_token_ids=1,2&token_id=3"]}`,
	`{"args":["https://h/v1/completions?max_tokens=100&eos_token_id=2&cost_per_token=0.000003"]}`,
	`{"env":[{"name":"EOS_TOKEN_ID","value":"2"}],"pairs":[["stop_token_ids","1,2"]],"vars":{"PAD_TOKEN_ID":"0"}}`,
	// Anthropic's extended thinking: the signature (and a redacted
	// block's data) goes back unchanged with the next turn
	`{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"EqQBCgIYAhIM+/="},` +
		`{"type":"redacted_thinking","data":"EmwKAhgBEgy3"},{"type":"text","text":"hi"}]}]}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}`,
	`{"thinking_blocks":[{"type":"thinking","thinking":"t","signature":"EqoBCkgIARAB"}]}`,
	// Bedrock Converse's reasoning block (ConverseStream's delta holds one
	// of its members) and OpenRouter's reasoning_details go back unchanged
	// the same way
	`{"output":{"message":{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"t",` +
		`"signature":"ErcBCkgIBxAB"}}},{"reasoningContent":{"redactedContent":"EmwKAhgB"}},{"text":"hi"}]}}}`,
	`{"contentBlockDelta":{"delta":{"reasoningContent":{"signature":"ErcBCkgIBxAB"}},"contentBlockIndex":0}}`,
	`{"delta":{"reasoningContent":{"redactedContent":"EmwKAhgB"}},"contentBlockIndex":0}`,
	`{"choices":[{"message":{"role":"assistant","content":"hi","reasoning_details":[{"type":"reasoning.text",` +
		`"text":"t","signature":"EqoBCkgIARAB","format":"anthropic-claude-v1","index":0},` +
		`{"type":"reasoning.encrypted","data":"gAAAAABo","id":"rs_1","format":"openai-responses-v1"},` +
		`{"type":"reasoning.summary","summary":"s"}]}}]}`,
	`{"choices":[{"delta":{"reasoning_details":[{"type":"reasoning.text","signature":"EqoBCkgIARAB","index":0}]}}]}`,
}

func TestLLMTokenParamsKept(t *testing.T) {
	for _, in := range llmTokenParams {
		v := decode(t, in)
		if n := redact.Redact(v, nil); n != 0 {
			b, _ := json.Marshal(v)
			t.Errorf("%s: %d values redacted: %s", in, n, b)
		}
	}
}

// TestTokenSecretsRedacted: the other direction: strings under a token's
// key are secrets, and so are numbers under one that neither names a
// token's id nor a rate (an OTP, a numeric PIN-like token).
func TestTokenSecretsRedacted(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"access_token":"ya29.T"}`, `{"access_token":"[redacted]"}`},
		{`{"id_token":"eyJ.T"}`, `{"id_token":"[redacted]"}`},
		{`{"refresh_token":"1//T"}`, `{"refresh_token":"[redacted]"}`},
		{`{"token":"T"}`, `{"token":"[redacted]"}`},
		{`{"token":123456}`, `{"token":"[redacted]"}`},
		{`{"auth_token":987654}`, `{"auth_token":"[redacted]"}`},
		{`{"mfa_token_code":123456}`, `{"mfa_token_code":"[redacted]"}`},
		{`{"api_token":"T"}`, `{"api_token":"[redacted]"}`},
		{`{"x-auth-token":"T"}`, `{"x-auth-token":"[redacted]"}`},
		{`{"token_id":"hvs.T"}`, `{"token_id":"[redacted]"}`},
		{`{"eos_token_id":"T"}`, `{"eos_token_id":"[redacted]"}`},
		{`{"token_ids":["hvs.T",1]}`, `{"token_ids":["[redacted]","[redacted]"]}`},
		{`{"token_ids":{"a":1}}`, `{"token_ids":{"a":"[redacted]"}}`},
		{`{"cost_per_token":"T"}`, `{"cost_per_token":"[redacted]"}`},
		{`{"secret_id":42}`, `{"secret_id":"[redacted]"}`},
		{`{"credential_id":42}`, `{"credential_id":"[redacted]"}`},
		{`{"auth":{"eos_token_id":2}}`, `{"auth":{"eos_token_id":"[redacted]"}}`},
		{`{"env":[{"name":"TOKEN_ID","value":"T"}],"pairs":[["token_ids","T"]]}`,
			`{"env":[{"name":"TOKEN_ID","value":"[redacted]"}],"pairs":[["token_ids","[redacted]"]]}`},
		// in strings: a credential's flag or parameter keeps hiding a
		// number, and a token id's name hides anything but numbers
		{`["--api-token","abc","--token","123456","--auth-token=987654","--eos-token-id","T","--token-id","hvs.T"]`,
			`["--api-token","[redacted]","--token","[redacted]","--auth-token=[redacted]","--eos-token-id","[redacted]","--token-id","[redacted]"]`},
		{`["TOKEN=123456","EOS_TOKEN_ID=T","STOP_TOKEN_IDS=1,T","TOKEN_ID=0x1F","AUTH_TOKEN: 42","EOS_TOKEN_ID: NaN"]`,
			`["TOKEN=[redacted]","EOS_TOKEN_ID=[redacted]","STOP_TOKEN_IDS=[redacted]","TOKEN_ID=[redacted]","AUTH_TOKEN: [redacted]","EOS_TOKEN_ID: [redacted]"]`},
		{`["curl","-d","user=bob&token=abc&access_token=1&eos_token_id=2x","-d","max_tokens=5&token_id=1,,2"]`,
			`["curl","-d","user=bob&token=[redacted]&access_token=[redacted]&eos_token_id=[redacted]","-d","max_tokens=5&token_id=[redacted]"]`},
		{`["https://h/x?max_tokens=100&token=123&access_token=456&eos_token_id=T"]`,
			`["https://h/x?max_tokens=100&token=[redacted]&access_token=[redacted]&eos_token_id=[redacted]"]`},
		{`{"env":[{"name":"TOKEN","value":"123456"}],"vars":{"EOS_TOKEN_ID":"2 T","token_id":""}}`,
			`{"env":[{"name":"TOKEN","value":"[redacted]"}],"vars":{"EOS_TOKEN_ID":"[redacted]","token_id":"[redacted]"}}`},
		// a signature is kept only in a thinking block: a webhook's, one in
		// another block, one inside a secret stay hidden, and so do a
		// thinking block's other secrets
		{`{"signature":"sha256=T","thinking":"t"}`, `{"signature":"[redacted]","thinking":"t"}`},
		{`{"webhook":{"type":"hmac","signature":"T"},"block":{"type":"text","signature":"T"}}`,
			`{"block":{"signature":"[redacted]","type":"text"},"webhook":{"signature":"[redacted]","type":"hmac"}}`},
		{`{"auth":{"type":"thinking","signature":"T"},"b":{"type":"thinking","token":"T","x_signature":"T"}}`,
			`{"auth":{"signature":"[redacted]","type":"[redacted]"},"b":{"token":"[redacted]","type":"thinking","x_signature":"[redacted]"}}`},
		{`{"type":"redacted_thinking","data":"D","signature":"T"}`, `{"data":"D","signature":"[redacted]","type":"redacted_thinking"}`},
		// Bedrock's and OpenRouter's: only in a reasoning block's own place
		{`{"reasoningText":{"signature":"T"},"reasoningContent":{"signature":"T","text":"t"}}`,
			`{"reasoningText":{"signature":"[redacted]"},"reasoningContent":{"signature":"[redacted]","text":"t"}}`},
		{`{"reasoningContent":{"reasoningText":{"text":"t","signature":"T","token":"T"},"x_signature":"T"}}`,
			`{"reasoningContent":{"reasoningText":{"text":"t","signature":"T","token":"[redacted]"},"x_signature":"[redacted]"}}`},
		{`{"auth":{"reasoningContent":{"signature":"T","reasoningText":{"text":"t","signature":"T"}}}}`,
			`{"auth":{"reasoningContent":{"signature":"[redacted]","reasoningText":{"text":"[redacted]","signature":"[redacted]"}}}}`},
		{`{"reasoning_details":[{"type":"reasoning.summary","signature":"T"},{"type":"hmac","signature":"T"}]}`,
			`{"reasoning_details":[{"type":"reasoning.summary","signature":"[redacted]"},{"type":"hmac","signature":"[redacted]"}]}`},
		{`{"type":"reasoning.text","text":"t","signature":"T","details":[{"type":"reasoning.text","signature":"T"}]}`,
			`{"type":"reasoning.text","text":"t","signature":"[redacted]","details":[{"type":"reasoning.text","signature":"[redacted]"}]}`},
		{`{"reasoning_details":[{"type":"reasoning.text","signature":"K","token":"T"}],"webhook":{"reasoning_details":{"signature":"T"}}}`,
			`{"reasoning_details":[{"type":"reasoning.text","signature":"K","token":"[redacted]"}],"webhook":{"reasoning_details":{"signature":"[redacted]"}}}`},
	} {
		v := decode(t, c.in)
		redact.Redact(v, nil)
		b, _ := json.Marshal(v)
		if want, _ := json.Marshal(decode(t, c.want)); string(b) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", c.in, b, want)
		}
	}
	// The key alone still names a secret: a caller that sees no value (a
	// log attribute's key, a header) hides it.
	for _, k := range []string{"eos_token_id", "stop_token_ids", "token_id", "cost_per_token"} {
		if !redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false", k)
		}
	}
}

// TestReplayedDataUnderConfiguredWord: a policy that makes "data" secret
// (E2A_SECRET_KEYS=data) still keeps a redacted_thinking block's and an
// OpenRouter reasoning.encrypted entry's data, and hides every other.
func TestReplayedDataUnderConfiguredWord(t *testing.T) {
	v := decode(t, `{"reasoning_details":[{"type":"reasoning.encrypted","data":"E"}],"a":{"type":"redacted_thinking",`+
		`"data":"E"},"b":{"type":"reasoning.encrypted","data":"T"},"c":[{"data":"T"}]}`)
	redact.New("data").Redact(v, nil)
	b, _ := json.Marshal(v)
	want, _ := json.Marshal(decode(t, `{"reasoning_details":[{"type":"reasoning.encrypted","data":"E"}],`+
		`"a":{"type":"redacted_thinking","data":"E"},"b":{"type":"reasoning.encrypted","data":"[redacted]"},"c":[{"data":"[redacted]"}]}`))
	if string(b) != string(want) {
		t.Errorf("got %s\nwant %s", b, want)
	}
}

// TestAcronymRuns: a phrase whose first word ends a run of capitals is the
// phrase (XAPIKey splits into xapi, key: the run XAPI ends with api).
func TestAcronymRuns(t *testing.T) {
	for _, k := range []string{"XAPIKey", "XApiKey", "xApiKey", "GCPAPIKey", "OpenAIAPIKey", "AWSSecretAccessKey",
		"XAPIKeys", "MyPRIVATEKey", "AWSACCESSKey", "NATSSeed"} {
		if !redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false (words %q)", k, redact.Words(k))
		}
	}
	for _, k := range []string{"XAPIKeyRef", "XAPIKeyName", "APIVersion", "XAPIHost", "PublicKey", "SortKey", "IDKey"} {
		if redact.IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = true (words %q)", k, redact.Words(k))
		}
	}
	v := decode(t, `{"headers":{"XAPIKey":"T1"},"h":[["XAPIKey","T2"]],"args":["--XAPIKey","T3","XAPIKey: T4"]}`)
	redact.Redact(v, nil)
	if b, _ := json.Marshal(v); string(b) != `{"args":["--XAPIKey","[redacted]","XAPIKey: [redacted]"],"h":[["XAPIKey","[redacted]"]],"headers":{"XAPIKey":"[redacted]"}}` {
		t.Errorf("got %s", b)
	}
}
