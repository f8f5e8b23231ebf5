package responses

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Params are OpenAI's create parameters that shape the model's answers
// rather than the gateway's work. Each is validated as OpenAI does,
// echoed in the response (OpenAI's default when unset), and passed to
// the upstream where its API has it (chatParams, responsesParams);
// docs/gateway.md lists the ones accepted without effect.
type Params struct {
	Temperature     *float64 `json:"temperature"`
	TopP            *float64 `json:"top_p"`
	MaxOutputTokens *int64   `json:"max_output_tokens"`
	TopLogprobs     *int     `json:"top_logprobs"`
	// Truncation "auto" would drop input that overflows the context; the
	// gateway never drops input ("disabled" in effect), so an overflow is
	// the upstream's error.
	Truncation           *string    `json:"truncation"`
	User                 *string    `json:"user"`
	ServiceTier          *string    `json:"service_tier"`
	PromptCacheKey       *string    `json:"prompt_cache_key"`
	PromptCacheRetention *string    `json:"prompt_cache_retention"`
	SafetyIdentifier     *string    `json:"safety_identifier"`
	Text                 *Text      `json:"text"`
	Reasoning            *Reasoning `json:"reasoning"`
	// Background runs the response without the client (background.go):
	// the request answers at once, the client polls, cancels or resumes
	// its stream. It needs store.
	Background    *bool          `json:"background"`
	StreamOptions *StreamOptions `json:"stream_options"`
	// ContextManagement (server-side compaction) is accepted without
	// effect: the gateway sends the whole conversation every round.
	ContextManagement []ContextManagement `json:"context_management"`
}

// Text is the text output configuration.
type Text struct {
	Format    *TextFormat `json:"format,omitempty"`
	Verbosity *string     `json:"verbosity,omitempty"`
}

// TextFormat is text.format: "text", "json_object" or "json_schema" with
// the schema.
type TextFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Description *string         `json:"description,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// Reasoning is the reasoning configuration of reasoning models.
type Reasoning struct {
	Effort          *string `json:"effort"`
	Summary         *string `json:"summary"`
	GenerateSummary *string `json:"generate_summary,omitempty"`
}

// StreamOptions are accepted without effect: the gateway's events carry
// no obfuscation field.
type StreamOptions struct {
	IncludeObfuscation *bool `json:"include_obfuscation"`
}

// ContextManagement is one context_management entry.
type ContextManagement struct {
	Type             string `json:"type"`
	CompactThreshold *int   `json:"compact_threshold,omitempty"`
}

// oneOf checks an optional enumerated string.
func oneOf(param string, v *string, allowed ...string) error {
	if v != nil && !slices.Contains(allowed, *v) {
		return invalid(param, "%s must be one of %q, got %q", param, allowed, *v)
	}
	return nil
}

// inRange checks an optional number.
func inRange[T int | int64 | float64](param string, v *T, lo, hi T) error {
	if v != nil && (*v < lo || *v > hi) {
		return invalid(param, "%s must be between %v and %v, got %v", param, lo, hi, *v)
	}
	return nil
}

// validate checks the parameters as OpenAI does.
func (p *Params) validate() error {
	errs := []error{
		inRange("temperature", p.Temperature, 0, 2),
		inRange("top_p", p.TopP, 0, 1),
		inRange("max_output_tokens", p.MaxOutputTokens, 16, 1<<30),
		inRange("top_logprobs", p.TopLogprobs, 0, 20),
		oneOf("truncation", p.Truncation, "auto", "disabled"),
		oneOf("service_tier", p.ServiceTier, "auto", "default", "flex", "scale", "priority", "fast", "ultrafast"),
		// "in_memory" is what the SDKs send; "in-memory" is the API
		// reference's spelling.
		oneOf("prompt_cache_retention", p.PromptCacheRetention, "in_memory", "in-memory", "24h"),
	}
	if p.User != nil && len(*p.User) > 512 {
		errs = append(errs, invalid("user", "user is at most 512 characters"))
	}
	for _, s := range []struct {
		name string
		v    *string
	}{{"prompt_cache_key", p.PromptCacheKey}, {"safety_identifier", p.SafetyIdentifier}} {
		if s.v != nil && len(*s.v) > 512 {
			errs = append(errs, invalid(s.name, "%s is at most 512 characters", s.name))
		}
	}
	if r := p.Reasoning; r != nil {
		errs = append(errs, oneOf("reasoning.effort", r.Effort, "none", "minimal", "low", "medium", "high", "xhigh", "max"),
			oneOf("reasoning.summary", r.Summary, "auto", "concise", "detailed"),
			oneOf("reasoning.generate_summary", r.GenerateSummary, "auto", "concise", "detailed"))
	}
	if t := p.Text; t != nil {
		errs = append(errs, oneOf("text.verbosity", t.Verbosity, "low", "medium", "high"), t.Format.validate())
	}
	for i, c := range p.ContextManagement {
		if c.Type != "compaction" {
			errs = append(errs, invalid(fmt.Sprintf("context_management[%d].type", i), `context_management[%d].type must be "compaction"`, i))
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *TextFormat) validate() error {
	if f == nil {
		return nil
	}
	switch f.Type {
	case "text", "json_object":
		if f.Name != "" || len(f.Schema) > 0 {
			return invalid("text.format", "text.format of type %q takes no name or schema", f.Type)
		}
	case "json_schema":
		if f.Name == "" || len(f.Name) > 64 {
			return invalid("text.format.name", "text.format.name is required for json_schema (at most 64 characters)")
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(f.Schema, &obj) != nil {
			return invalid("text.format.schema", "text.format.schema must be a JSON Schema object")
		}
	default:
		return invalid("text.format.type", `text.format.type must be "text", "json_object" or "json_schema", got %q`, f.Type)
	}
	return nil
}

// chatParams are the parameters in Chat Completions' names: max_tokens
// for max_output_tokens, response_format for text.format,
// reasoning_effort for reasoning.effort.
type chatParams struct {
	sharedParams
	MaxTokens       *int64          `json:"max_tokens,omitempty"`
	ResponseFormat  json.RawMessage `json:"response_format,omitempty"`
	ReasoningEffort *string         `json:"reasoning_effort,omitempty"`
	Verbosity       *string         `json:"verbosity,omitempty"`
}

// sharedParams are the parameters both upstream APIs name as the
// Responses API does.
type sharedParams struct {
	Temperature          *float64 `json:"temperature,omitempty"`
	TopP                 *float64 `json:"top_p,omitempty"`
	User                 *string  `json:"user,omitempty"`
	ServiceTier          *string  `json:"service_tier,omitempty"`
	PromptCacheKey       *string  `json:"prompt_cache_key,omitempty"`
	PromptCacheRetention *string  `json:"prompt_cache_retention,omitempty"`
	SafetyIdentifier     *string  `json:"safety_identifier,omitempty"`
}

func (p *Params) shared() sharedParams {
	return sharedParams{Temperature: p.Temperature, TopP: p.TopP, User: p.User, ServiceTier: p.ServiceTier,
		PromptCacheKey: p.PromptCacheKey, PromptCacheRetention: p.PromptCacheRetention, SafetyIdentifier: p.SafetyIdentifier}
}

func (p *Params) chat() chatParams {
	if p == nil {
		return chatParams{}
	}
	c := chatParams{sharedParams: p.shared(), MaxTokens: p.MaxOutputTokens}
	if p.Reasoning != nil {
		c.ReasoningEffort = p.Reasoning.Effort
	}
	if t := p.Text; t != nil {
		c.Verbosity = t.Verbosity
		if f := t.Format; f != nil && f.Type != "text" {
			rf := map[string]any{"type": f.Type}
			if f.Type == "json_schema" {
				js := map[string]any{"name": f.Name, "schema": f.Schema}
				if f.Description != nil {
					js["description"] = *f.Description
				}
				if f.Strict != nil {
					js["strict"] = *f.Strict
				}
				rf["json_schema"] = js
			}
			c.ResponseFormat, _ = json.Marshal(rf)
		}
	}
	return c
}

// responsesParams are the parameters a Responses upstream takes as they
// are.
type responsesParams struct {
	sharedParams
	MaxOutputTokens *int64     `json:"max_output_tokens,omitempty"`
	TopLogprobs     *int       `json:"top_logprobs,omitempty"`
	Truncation      *string    `json:"truncation,omitempty"`
	Text            *Text      `json:"text,omitempty"`
	Reasoning       *Reasoning `json:"reasoning,omitempty"`
}

func (p *Params) responses() responsesParams {
	if p == nil {
		return responsesParams{}
	}
	return responsesParams{sharedParams: p.shared(), MaxOutputTokens: p.MaxOutputTokens, TopLogprobs: p.TopLogprobs,
		Truncation: p.Truncation, Text: p.Text, Reasoning: p.Reasoning}
}

// echo fills the response's copy of the parameters: the request's values,
// else OpenAI's defaults.
func (p *Params) echo(r *Response) {
	r.Temperature, r.TopP, r.Truncation, r.ServiceTier = 1, 1, "disabled", "default"
	r.Text = Text{Format: &TextFormat{Type: "text"}, Verbosity: ptr("medium")}
	r.Reasoning = Reasoning{}
	r.MaxOutputTokens, r.User, r.PromptCacheKey, r.SafetyIdentifier = p.MaxOutputTokens, p.User, p.PromptCacheKey, p.SafetyIdentifier
	r.PromptCacheRetention = p.PromptCacheRetention
	if p.Temperature != nil {
		r.Temperature = *p.Temperature
	}
	if p.TopP != nil {
		r.TopP = *p.TopP
	}
	if p.TopLogprobs != nil {
		r.TopLogprobs = *p.TopLogprobs
	}
	if p.Truncation != nil {
		r.Truncation = *p.Truncation
	}
	if p.ServiceTier != nil {
		r.ServiceTier = servedTier(*p.ServiceTier)
	}
	if p.Background != nil {
		r.Background = *p.Background
	}
	if p.Reasoning != nil {
		r.Reasoning = Reasoning{Effort: p.Reasoning.Effort, Summary: p.Reasoning.Summary}
		if r.Reasoning.Summary == nil {
			r.Reasoning.Summary = p.Reasoning.GenerateSummary
		}
	}
	if t := p.Text; t != nil {
		if t.Format != nil {
			r.Text.Format = t.Format
		}
		if t.Verbosity != nil {
			r.Text.Verbosity = t.Verbosity
		}
	}
}

// servedTier is the service_tier a response reports for the requested
// one, as OpenAI reports it: "auto" is served as "default" and "fast" as
// "priority" (OpenAI's fast mode is its priority tier).
func servedTier(requested string) string {
	switch requested {
	case "auto":
		return "default"
	case "fast":
		return "priority"
	}
	return requested
}

// unsupported refuses what names state the gateway does not keep, and
// checks that the options accepted without effect are objects.
func (r *Request) unsupported() error {
	if isSet(r.Conversation) {
		return invalid("conversation", "conversation is not supported by this gateway: continue a conversation with previous_response_id")
	}
	if isSet(r.Prompt) {
		return invalid("prompt", "prompt (a stored prompt template) is not supported by this gateway: send instructions and input instead")
	}
	for _, o := range []struct {
		name string
		raw  json.RawMessage
	}{{"moderation", r.Moderation}, {"access_programs", r.AccessPrograms}, {"image", r.Image}, {"prompt_cache_options", r.PromptCacheOptions}} {
		if err := object(o.name, o.raw); err != nil {
			return err
		}
	}
	return nil
}

// object checks that an optional field accepted without effect is an
// object.
func object(param string, raw json.RawMessage) error {
	var obj map[string]json.RawMessage
	if isSet(raw) && json.Unmarshal(raw, &obj) != nil {
		return invalid(param, "%s must be an object", param)
	}
	return nil
}

// isSet reports whether an optional raw field was sent with a value.
func isSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
