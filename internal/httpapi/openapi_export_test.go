package httpapi

import "fmt"

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
