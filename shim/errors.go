package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// apiError is an error that reaches the client as an OpenAI-style error
// object with an HTTP status.
type apiError struct {
	Status  int
	Message string
	Type    string
	Param   string
	Code    string
}

func (e *apiError) Error() string { return e.Message }

// badRequest is a 400 invalid_request_error about param.
func badRequest(param, format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

// unavailable is a 503 telling the client to retry later.
func unavailable(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "unavailable", Message: fmt.Sprintf(format, args...)}
}

// upstreamError is a 502 for an answer from llama-server that the shim
// cannot use.
func upstreamError(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_error", Message: fmt.Sprintf(format, args...)}
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) body() errorBody {
	b := errorBody{Error: errorObject{Message: e.Message, Type: e.Type}}
	if e.Param != "" {
		p := e.Param
		b.Error.Param = &p
	}
	if e.Code != "" {
		c := e.Code
		b.Error.Code = &c
	}
	return b
}

// asAPIError turns any error into the apiError the client sees: an
// apiError as is, anything else as a 500 whose message says what failed.
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

func writeError(w http.ResponseWriter, err error) {
	if errors.Is(err, errAnswered) {
		return
	}
	ae := asAPIError(err)
	writeJSON(w, ae.Status, ae.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error":{"message":"encoding response","type":"server_error","param":null,"code":null}}`)
	}
	writeBody(w, status, data)
}

// writeBody writes data, a JSON document, as the answer.
func writeBody(w http.ResponseWriter, status int, data []byte) {
	data = append(data, '\n')
	w.Header().Set("Content-Type", "application/json")
	// with its length known the answer goes out whole, not in chunks
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	w.Write(data)
}
