package storage

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// store is the provider-neutral subset of an object store the cycle needs. Every call is
// one HTTP request (SDK retries are off: seed 000's retry rule is applied by the cycle).
type store interface {
	put(ctx context.Context, key string, body []byte) error
	// get streams the object into sink; the sink's time is part of the operation.
	get(ctx context.Context, key string, sink func(io.Reader) error) error
	list(ctx context.Context, prefix string) ([]string, error)
	del(ctx context.Context, key string) error
	// statusOf extracts the HTTP status of a provider error, 0 when there is none.
	statusOf(err error) int
}

// newTransport gives every target its own connection pool, sized for the largest
// concurrency level so parallel GETs are not serialised behind two idle connections.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          300,
		MaxIdleConnsPerHost:   300,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ExpectContinueTimeout: time.Second,
		// Stored bytes must be what travels: never let the transport decompress.
		DisableCompression: true,
	}
}

func newStore(ctx context.Context, t *Target, sec Secret, tr *http.Transport) (store, error) {
	switch t.Provider {
	case ProviderS3:
		return newS3Store(t, sec, tr)
	case ProviderAzure:
		return newAzureStore(t, sec, tr)
	case ProviderGCS:
		return newGCSStore(ctx, t, sec, tr)
	}
	return nil, fmt.Errorf("unknown provider %q", t.Provider)
}
