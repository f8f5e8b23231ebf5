// Package errhttp translates errdefs kinds to HTTP: one table from kind to
// status and default code, and the renderers of the error bodies that
// clients see. REST and the Responses gateway share OpenAI's shape
// ({"error": {"type", "code", "message", "param", "request_id"}}, where
// type is OpenAI's class of the status, which SDKs read as err.type); the
// Jupyter Kernel Gateway API answers jupyter_server's ({"message",
// "reason", "request_id"}). An internal error (500) is logged with the
// request's logger and its message replaced by InternalSentence.
//
// It may import internal/errdefs and internal/log.
package errhttp
