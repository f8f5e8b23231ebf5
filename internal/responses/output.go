package responses

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// Response is a Responses API response object.
type Response struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	CompletedAt        *int64            `json:"completed_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	IncompleteDetails  *Incomplete       `json:"incomplete_details"`
	Error              any               `json:"error"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	Instructions       *string           `json:"instructions"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       any               `json:"conversation"`
	Prompt             any               `json:"prompt"`
	MaxToolCalls       *int              `json:"max_tool_calls"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Temperature        float64           `json:"temperature"`
	TopP               float64           `json:"top_p"`
	TopLogprobs        int               `json:"top_logprobs"`
	Text               Text              `json:"text"`
	Reasoning          Reasoning         `json:"reasoning"`
	Truncation         string            `json:"truncation"`
	ServiceTier        string            `json:"service_tier"`
	User               *string           `json:"user"`
	PromptCacheKey     *string           `json:"prompt_cache_key"`
	// PromptCacheRetention and SafetyIdentifier are echoed from the request.
	PromptCacheRetention *string           `json:"prompt_cache_retention"`
	SafetyIdentifier     *string           `json:"safety_identifier"`
	Store                bool              `json:"store"`
	Metadata             map[string]string `json:"metadata"`
	Usage                Usage             `json:"usage"`
	// MultiAgent is the request's multi_agent (multiagent.go).
	MultiAgent *MultiAgent `json:"multi_agent,omitempty"`
}

// Incomplete says why a response stopped early.
type Incomplete struct {
	Reason string `json:"reason"`
}

// Usage is the upstream usage summed over the rounds.
type Usage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// CodeInterpreterCall is a code_interpreter_call output item.
type CodeInterpreterCall struct {
	Type        string              `json:"type"`
	ID          string              `json:"id"`
	Status      string              `json:"status"`
	ContainerID string              `json:"container_id"`
	Code        string              `json:"code"`
	Outputs     *[]tools.CodeOutput `json:"outputs"`
	Agent       *AgentRef           `json:"agent,omitempty"`
}

// ToolCall is a tool_call output item: one call of a gateway function
// tool (builtin__computer_exec, …_write_file, …_read_file, python) run
// in the response's computer. Output is the text the model saw.
type ToolCall struct {
	Type        string    `json:"type"`
	ID          string    `json:"id"`
	Status      string    `json:"status"`
	ContainerID string    `json:"container_id"`
	Name        string    `json:"name"`
	Arguments   string    `json:"arguments"`
	Output      string    `json:"output"`
	Agent       *AgentRef `json:"agent,omitempty"`
}

// FunctionCall is a client function_call output item.
type FunctionCall struct {
	Type      string    `json:"type"`
	ID        string    `json:"id"`
	CallID    string    `json:"call_id"`
	Name      string    `json:"name"`
	Arguments string    `json:"arguments"`
	Status    string    `json:"status"`
	Agent     *AgentRef `json:"agent,omitempty"`
}

// Message is an assistant message output item.
type Message struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Role    string       `json:"role"`
	Status  string       `json:"status"`
	Content []OutputText `json:"content"`
	Agent   *AgentRef    `json:"agent,omitempty"`
}

// OutputText is a message's text part.
type OutputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

func newID(prefix string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Event is one streaming event: its type and its fields besides type and
// sequence_number.
type Event struct {
	Type   string
	Fields map[string]any
}

// MarshalJSON renders the event as one object: type and the fields
// (sequence_number among them).
func (e Event) MarshalJSON() ([]byte, error) {
	m := map[string]any{"type": e.Type}
	for k, v := range e.Fields {
		m[k] = v
	}
	return json.Marshal(m)
}

// in progress).
func incomplete(status *string) bool {
	if *status != "in_progress" {
		return false
	}
	*status = "incomplete"
	return true
}

// asIncomplete is the item marked incomplete, if it was in progress.
func (m Message) asIncomplete() (any, bool) {
	ok := incomplete(&m.Status)
	return m, ok
}

func (c FunctionCall) asIncomplete() (any, bool) {
	ok := incomplete(&c.Status)
	return c, ok
}

func (c CodeInterpreterCall) asIncomplete() (any, bool) {
	ok := incomplete(&c.Status)
	return c, ok
}

func (c ToolCall) asIncomplete() (any, bool) {
	ok := incomplete(&c.Status)
	return c, ok
}

// agentOf is the item's agent (nil outside multi-agent responses).
func (m Message) agentOf() *AgentRef             { return m.Agent }
func (c FunctionCall) agentOf() *AgentRef        { return c.Agent }
func (c CodeInterpreterCall) agentOf() *AgentRef { return c.Agent }
func (c ToolCall) agentOf() *AgentRef            { return c.Agent }
