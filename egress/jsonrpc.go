package egress

// ErrorData is the data member of the pipeline's JSON-RPC errors: the
// pipeline code of the error ([Classify]).
type ErrorData struct {
	Code      string `json:"code"`
	Retryable *bool  `json:"retryable,omitempty"`
}
