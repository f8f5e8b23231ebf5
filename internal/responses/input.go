package responses

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cubicle-sandbox/cubicle/internal/tools"
)

// inputItem is one item of an input array: a message, a client
// function_call or its function_call_output, or one of the gateway's own
// output items sent back (code_interpreter_call, tool_call).
type inputItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// function_call, function_call_output, tool_call, code_interpreter_call
	ID          string          `json:"id"`
	CallID      string          `json:"call_id"`
	Name        string          `json:"name"`
	Arguments   string          `json:"arguments"`
	Output      string          `json:"output"`
	Status      string          `json:"status"`
	ContainerID string          `json:"container_id"`
	Code        *string         `json:"code"`
	Outputs     json.RawMessage `json:"outputs"`
	// Phase (an assistant message's "commentary" or "final_answer", sent
	// back by the AI SDK) is ignored.
	Phase json.RawMessage `json:"phase"`
}

// contentPart is one part of a message's content array.
type contentPart struct {
	Type        string          `json:"type"`
	Text        string          `json:"text"`
	Annotations json.RawMessage `json:"annotations"` // output_text sent back: ignored
	Logprobs    json.RawMessage `json:"logprobs"`    // output_text sent back: ignored
	FileID      string          `json:"file_id"`
	ImageURL    *string         `json:"image_url"`
	Detail      string          `json:"detail"`
	FileData    *string         `json:"file_data"`
	FileURL     *string         `json:"file_url"`
	Filename    *string         `json:"filename"`
	// PromptCacheBreakpoint (an explicit prompt cache breakpoint) is
	// accepted without effect: the upstream caches as it does.
	PromptCacheBreakpoint json.RawMessage `json:"prompt_cache_breakpoint"`
}

// imageRef is an input_image by file_id, resolved to a data URL before
// any upstream call (Gateway.resolveImages).
type imageRef struct {
	msg, part int // index in plan.messages and in its Parts
	fileID    string
	param     string
}

// MaxImageBytes bounds one input image (a data URL's decoded bytes, or a
// stored file sent as one).
const MaxImageBytes = 8 << 20

// imageTypes are the image media types an upstream accepts.
var imageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// NotSeenOutput is what a replayed code_interpreter_call without outputs
// (sent back without include) tells the model.
const NotSeenOutput = "(the output of this call is not available)"

// parsedInput is the input as Chat Completions messages.
type parsedInput struct {
	messages []chatMessage
	fileIDs  []string   // input_file ids, in order, deduplicated
	images   []imageRef // msg indexes relative to messages
	uploads  []upload   // input_file parts by file_data
}

func parseInput(raw json.RawMessage) (*parsedInput, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid("input", "input is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return &parsedInput{messages: []chatMessage{{Role: "user", Content: ptr(s)}}}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, invalid("input", "input must be a string or an array of items")
	}
	in := &parsedInput{}
	// pendingCalls is the index of the assistant message that consecutive
	// function_call items join (one assistant turn with several calls).
	pendingCalls := -1
	for i, it := range items {
		param := fmt.Sprintf("input[%d]", i)
		var item inputItem
		if err := strict(it, &item, param); err != nil {
			return nil, err
		}
		if item.Type != "function_call" {
			pendingCalls = -1
		}
		switch item.Type {
		case "", "message":
			if err := in.message(item, param); err != nil {
				return nil, err
			}
		case "function_call":
			if item.CallID == "" || item.Name == "" {
				return nil, invalid(param, "a function_call item needs call_id and name")
			}
			call := chatToolCall{ID: item.CallID, Type: "function", Function: chatCallFunction{Name: item.Name, Arguments: item.Arguments}}
			if pendingCalls >= 0 {
				in.messages[pendingCalls].ToolCalls = append(in.messages[pendingCalls].ToolCalls, call)
				continue
			}
			pendingCalls = len(in.messages)
			in.messages = append(in.messages, chatMessage{Role: "assistant", ToolCalls: []chatToolCall{call}})
		case "function_call_output":
			if item.CallID == "" {
				return nil, invalid(param+".call_id", "a function_call_output item needs call_id")
			}
			in.messages = append(in.messages, chatMessage{Role: "tool", ToolCallID: item.CallID, Content: ptr(item.Output)})
		case "code_interpreter_call":
			if item.ID == "" || item.Code == nil {
				return nil, invalid(param, "a code_interpreter_call item needs id and code")
			}
			args, _ := json.Marshal(map[string]string{"code": *item.Code})
			out, err := codeOutputText(item.Outputs, param+".outputs")
			if err != nil {
				return nil, err
			}
			in.replayCall(item.ID, tools.CodeInterpreterName, string(args), out)
		case "tool_call":
			if item.ID == "" || item.Name == "" {
				return nil, invalid(param, "a tool_call item needs id and name")
			}
			in.replayCall(item.ID, item.Name, item.Arguments, item.Output)
		default:
			return nil, invalid(param+".type", "unsupported input item type %q; supported: message, function_call, "+
				"function_call_output, code_interpreter_call, tool_call, item_reference", item.Type)
		}
	}
	return in, nil
}

// replayCall adds a gateway tool call the model made earlier as the
// model's function call and the output it saw.
func (in *parsedInput) replayCall(id, name, args, output string) {
	in.messages = append(in.messages,
		chatMessage{Role: "assistant", ToolCalls: []chatToolCall{{ID: id, Type: "function", Function: chatCallFunction{Name: name, Arguments: args}}}},
		chatMessage{Role: "tool", ToolCallID: id, Content: ptr(output)})
}

// ImageSentNote stands for an image output of a code_interpreter_call sent
// back (the client's logs carry no image placeholder).
const ImageSentNote = "[image]"

// codeOutputText is the text the model saw for a code_interpreter_call
// sent back: its logs and a note per image (NotSeenOutput when outputs
// were not included).
func codeOutputText(raw json.RawMessage, param string) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return NotSeenOutput, nil
	}
	var outs []tools.CodeOutput
	if json.Unmarshal(raw, &outs) != nil {
		return "", invalid(param, "%s must be an array of logs and image outputs", param)
	}
	var logs []string
	for _, o := range outs {
		switch o.Type {
		case "logs":
			logs = append(logs, o.Logs)
		case "image":
			logs = append(logs, ImageSentNote)
		}
	}
	return strings.Join(logs, "\n"), nil
}

// message adds a message item. A message left without text or image (only
// input_file parts, which reach the computer instead) is not sent.
func (in *parsedInput) message(item inputItem, param string) error {
	switch item.Role {
	case "user", "system", "developer", "assistant":
	default:
		return invalid(param+".role", "role must be user, system, developer or assistant")
	}
	role := item.Role
	if role == "developer" {
		role = "system"
	}
	var s string
	if json.Unmarshal(item.Content, &s) == nil {
		in.messages = append(in.messages, chatMessage{Role: role, Content: ptr(s)})
		return nil
	}
	var raws []json.RawMessage
	if json.Unmarshal(item.Content, &raws) != nil {
		return invalid(param+".content", "content must be a string or an array of parts")
	}
	var parts []chatPart
	var images []imageRef
	for i, pr := range raws {
		pp := fmt.Sprintf("%s.content[%d]", param, i)
		var part contentPart
		if err := strict(pr, &part, pp); err != nil {
			return err
		}
		if err := object(pp+".prompt_cache_breakpoint", part.PromptCacheBreakpoint); err != nil {
			return err
		}
		switch part.Type {
		case "input_text", "output_text":
			if part.FileID != "" {
				return invalid(pp+".file_id", "file_id belongs to input_file and input_image parts")
			}
			if part.ImageURL != nil || part.Detail != "" || part.FileData != nil || part.FileURL != nil || part.Filename != nil {
				return invalid(pp, "a %s part holds only text", part.Type)
			}
			parts = append(parts, chatPart{Type: "text", Text: part.Text})
		case "input_file":
			if err := in.inputFile(part, pp); err != nil {
				return err
			}
		case "input_image":
			if item.Role != "user" {
				return invalid(pp, "input_image parts belong in user messages")
			}
			img, ref, err := imagePart(part, pp)
			if err != nil {
				return err
			}
			if ref != "" {
				images = append(images, imageRef{msg: len(in.messages), part: len(parts), fileID: ref, param: pp + ".file_id"})
			}
			parts = append(parts, img)
		default:
			return invalid(pp+".type", "unsupported content part %q; supported: input_text, input_file, input_image", part.Type)
		}
	}
	hasImage := slices.ContainsFunc(parts, func(p chatPart) bool { return p.Type == "image_url" })
	if !hasImage {
		// Text only: one string, as before.
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		if b.Len() == 0 && len(raws) > 0 {
			return nil // only files: nothing for the model to read
		}
		in.messages = append(in.messages, chatMessage{Role: role, Content: ptr(b.String())})
		return nil
	}
	in.images = append(in.images, images...)
	in.messages = append(in.messages, chatMessage{Role: role, Parts: parts})
	return nil
}

// inputFile adds an input_file part: a stored file's id, or inline
// file_data (base64, or a base64 data: URL) with its filename, stored as a
// file before any upstream call (Gateway.resolve).
func (in *parsedInput) inputFile(part contentPart, param string) error {
	switch {
	case part.FileURL != nil:
		return invalid(param+".file_url", "input_file by file_url is not supported: the gateway fetches no URL a client names (it would reach the server's own network); upload the file (POST /v1/files) and send file_id, or send file_data")
	case part.Text != "" || part.ImageURL != nil:
		return invalid(param, `an input_file part holds file_id, or file_data and filename: {"type":"input_file","file_id":"file_…"}`)
	case !slices.Contains([]string{"", "auto", "low", "high"}, part.Detail):
		// Accepted without effect: the file goes to the computer, not to the model.
		return invalid(param+".detail", "detail must be auto, low or high")
	case part.FileData != nil && part.FileID != "":
		return invalid(param, "an input_file part holds file_id or file_data, not both")
	case part.FileData != nil:
		if part.Filename == nil || *part.Filename == "" {
			return invalid(param+".filename", "an input_file part with file_data needs filename")
		}
		data := *part.FileData
		if rest, ok := strings.CutPrefix(data, "data:"); ok {
			if _, b64, ok := strings.Cut(rest, ";base64,"); ok {
				data = b64
			} else {
				return invalid(param+".file_data", "a data: URL in file_data must be base64 (data:<type>;base64,…)")
			}
		}
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return invalid(param+".file_data", "file_data must be base64 or a base64 data: URL")
		}
		in.uploads = append(in.uploads, upload{filename: *part.Filename, data: raw, param: param + ".file_data"})
		return nil
	case part.Filename != nil:
		return invalid(param+".filename", "filename goes with file_data (a stored file keeps its own name)")
	case part.FileID == "":
		return invalid(param, `an input_file part needs file_id or file_data: {"type":"input_file","file_id":"file_…"}`)
	}
	if !slices.Contains(in.fileIDs, part.FileID) {
		in.fileIDs = append(in.fileIDs, part.FileID)
	}
	return nil
}

// upload is an input_file sent inline, stored as a file in Gateway.resolve.
type upload struct {
	filename string
	data     []byte
	param    string
}

// imagePart checks an input_image part; a file_id image is returned with
// an empty URL and the id to resolve.
func imagePart(part contentPart, param string) (chatPart, string, error) {
	switch part.Detail {
	case "", "auto", "low", "high", "original":
	default:
		return chatPart{}, "", invalid(param+".detail", "detail must be auto, low, high or original")
	}
	if part.Text != "" || part.FileData != nil || part.FileURL != nil || part.Filename != nil {
		return chatPart{}, "", invalid(param, "an input_image part holds image_url or file_id (and detail)")
	}
	img := chatPart{Type: "image_url", ImageURL: &chatImageURL{Detail: part.Detail}}
	switch {
	case part.ImageURL != nil && part.FileID != "":
		return chatPart{}, "", invalid(param, "an input_image part holds image_url or file_id, not both")
	case part.FileID != "":
		return img, part.FileID, nil
	case part.ImageURL == nil:
		return chatPart{}, "", invalid(param+".image_url", "an input_image part needs image_url (https or data: URL) or file_id")
	}
	u := *part.ImageURL
	switch {
	case strings.HasPrefix(u, "https://"):
		if len(u) > 8<<10 {
			return chatPart{}, "", invalid(param+".image_url", "image_url is longer than 8 KiB")
		}
	case strings.HasPrefix(u, "data:"):
		mediaType, _, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ";base64,")
		if !ok || !slices.Contains(imageTypes, mediaType) {
			return chatPart{}, "", invalid(param+".image_url", "a data: image_url must be base64 %s", strings.Join(imageTypes, ", "))
		}
		if len(u) > MaxImageBytes/3*4+64 {
			return chatPart{}, "", invalid(param+".image_url", "the image is larger than %d bytes", MaxImageBytes)
		}
	default:
		return chatPart{}, "", invalid(param+".image_url", "image_url must be an https:// or a data: URL")
	}
	img.ImageURL.URL = u
	return img, "", nil
}
