package openai_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestExampleStreamIsTheWireFormat: the model server of the package's
// Example streams what the official client reads as the completion the
// Example's output shows (its text, finish reason, model and usage), so
// the Example documents the bridge against the real format, not a fake of
// it.
func TestExampleStreamIsTheWireFormat(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(chatCompletions))
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("sk-example"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         "gpt-4.1-mini",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the capital of France?")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if ch := stream.Current(); !acc.AddChunk(ch) {
			t.Fatalf("the accumulator refused chunk %s", ch.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("%d choices", len(acc.Choices))
	}
	got := acc.Choices[0]
	if got.Message.Content != "Paris is the capital of France." || got.FinishReason != "stop" || acc.Model != "gpt-4.1-mini" ||
		acc.Usage.PromptTokens != 14 || acc.Usage.CompletionTokens != 7 || acc.Usage.TotalTokens != 21 {
		t.Fatalf("the official client read content %q, finish %q, model %q, usage %+v", got.Message.Content, got.FinishReason, acc.Model, acc.Usage)
	}
}
