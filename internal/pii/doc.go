// Package pii finds personal data in text by its shape and replaces each
// datum with a fixed placeholder: e-mail addresses, telephone numbers,
// IBANs (with their mod-97 check) and payment card numbers (with the Luhn
// check). It is what a key that redacts personal data (policy.settings.
// redact_pii on the key or its organisation) applies to every tool result
// a model reads (docs/tools.md, "Personal data in tool results").
//
// Redact is one pass over its input, linear in its length (each candidate
// is bounded: 64 characters of an address's local part, 253 of its domain,
// 19 digits of a number, 34 characters of an IBAN), and allocates only
// when it replaces something. It works on bytes; the patterns are ASCII, so
// a UTF-8 text stays valid.
//
// It may import only the standard library.
package pii
