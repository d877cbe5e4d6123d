package storage

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"syscall"

	"stormwatch/agents/internal/sample"
)

// Error classes of docs/api.md.
const (
	classTimeout     = "timeout"
	classAuth        = "auth"
	classNotFound    = "not_found"
	classThrottled   = "throttled"
	classServerError = "server_error"
	classNetwork     = "network"
)

var (
	// errCorrupt: the bytes read back are not the bytes written.
	errCorrupt = errors.New("object content differs from what was written")
	// errCredentials: the credentials reference could not be resolved on this host.
	errCredentials = errors.New("credentials unavailable")
)

// classify maps an operation error to a sample status and error class. opCtx is the
// operation's own context, whose deadline is the per-operation timeout.
func classify(opCtx context.Context, statusOf func(error) int, err error) (sample.Status, string) {
	if errors.Is(err, errCorrupt) {
		return sample.StatusCorrupt, classServerError
	}
	if errors.Is(err, errCredentials) {
		return sample.StatusError, classAuth
	}
	code := 0
	if statusOf != nil {
		code = statusOf(err)
	}
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return sample.StatusError, classAuth
	case code == http.StatusNotFound:
		return sample.StatusError, classNotFound
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		// S3 SlowDown and Azure ServerBusy both answer 503.
		return sample.StatusError, classThrottled
	case code >= 400:
		return sample.StatusError, classServerError
	}
	if errors.Is(opCtx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return sample.StatusTimeout, classTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return sample.StatusTimeout, classTimeout
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return sample.StatusRefused, classNetwork
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return sample.StatusError, classNetwork
	}
	// Whatever else failed below HTTP (DNS, TLS, a closed connection) is the network's.
	return sample.StatusError, classNetwork
}

// queryString matches a URL's query in an error message: an Azure SAS token travels there.
var queryString = regexp.MustCompile(`\?[^\s"']*`)

// redact is how an error reaches a log line: URLs lose their query strings.
func redact(err error) string {
	if err == nil {
		return ""
	}
	return queryString.ReplaceAllString(err.Error(), "?[redacted]")
}
