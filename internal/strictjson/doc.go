// Package strictjson is the strict pre-pass over a client's JSON body that
// encoding/json lacks: a key given twice (the decoder keeps the last) and
// a struct field's name in another case (the decoder matches it) are
// refused, naming the field, as is a value of the wrong JSON type. Unknown
// fields are left to the caller (the REST API refuses them, the Kernel
// Gateway API accepts them as jupyter_server does). The transports
// (internal/httpapi, internal/jupyter) run it before decoding, and word
// their own type errors with Kind.
//
// It may import only the standard library.
package strictjson
