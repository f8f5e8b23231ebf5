package httpapi

import (
	"encoding/json"
	"fmt"
)

// CheckOpenAPIAnswer validates the JSON answer body with status of the
// operation "METHOD /path" (as the document writes its path) against the
// document doc (GET /openapi.json, decoded), for the tests of package
// httpapi_test; nil: valid.
func CheckOpenAPIAnswer(doc map[string]any, operation string, status int, body any) []string {
	content, err := answerContent(doc, operation, fmt.Sprint(status))
	if err != nil {
		return []string{err.Error()}
	}
	media, _ := content["application/json"].(map[string]any)
	if media == nil {
		return []string{operation + " answers no application/json"}
	}
	return validate(doc, media["schema"].(map[string]any), body, operation)
}

// CheckOpenAPIRequest validates the JSON request body of the operation
// "METHOD /path" against the document doc; nil: valid.
func CheckOpenAPIRequest(doc map[string]any, operation string, body any) []string {
	op := docOperations(doc)[operation]
	if op == nil {
		return []string{"no operation " + operation}
	}
	rb, _ := op["requestBody"].(map[string]any)
	content, _ := rb["content"].(map[string]any)
	media, _ := content["application/json"].(map[string]any)
	s, _ := media["schema"].(map[string]any)
	if s == nil {
		return []string{operation + " takes no application/json body"}
	}
	var v any // as JSON has it (numbers are float64)
	b, _ := json.Marshal(body)
	json.Unmarshal(b, &v)
	return validate(doc, s, v, operation)
}
