package storage

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	gcs "cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"
)

type gcsStore struct {
	c      *gcs.Client
	bucket *gcs.BucketHandle
}

func newGCSStore(ctx context.Context, t *Target, sec Secret, tr *http.Transport) (*gcsStore, error) {
	var rt http.RoundTripper = tr
	if sec.ServiceAccountJSON != "" {
		authed, err := htransport.NewTransport(ctx, tr,
			option.WithAuthCredentialsJSON(option.ServiceAccount, []byte(sec.ServiceAccountJSON)),
			option.WithScopes(gcs.ScopeReadWrite))
		if err != nil {
			return nil, err
		}
		rt = authed
	}
	// Our own client carries the auth, so the library must not look for ambient credentials.
	opts := []option.ClientOption{option.WithHTTPClient(&http.Client{Transport: rt}), option.WithoutAuthentication()}
	if t.Endpoint != "" {
		ep := strings.TrimSuffix(t.Endpoint, "/")
		if !strings.HasSuffix(ep, "/storage/v1") {
			ep += "/storage/v1"
		}
		opts = append(opts, option.WithEndpoint(ep+"/"))
	}
	c, err := gcs.NewClient(ctx, opts...)
	if err != nil {
		return nil, err
	}
	c.SetRetry(gcs.WithPolicy(gcs.RetryNever))
	return &gcsStore{c: c, bucket: c.Bucket(t.Bucket)}, nil
}

func (s *gcsStore) put(ctx context.Context, key string, body []byte) error {
	w := s.bucket.Object(key).NewWriter(ctx)
	// A single multipart upload request, not a resumable session.
	w.ChunkSize = 0
	w.ContentType = "application/octet-stream"
	if _, err := w.Write(body); err != nil {
		_ = w.Close()
		return err
	}
	return w.Close()
}

func (s *gcsStore) get(ctx context.Context, key string, sink func(io.Reader) error) error {
	r, err := s.bucket.Object(key).ReadCompressed(true).NewReader(ctx)
	if err != nil {
		return err
	}
	defer r.Close()
	return sink(r)
}

func (s *gcsStore) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	q := &gcs.Query{Prefix: prefix}
	if err := q.SetAttrSelection([]string{"Name"}); err != nil {
		return nil, err
	}
	it := s.bucket.Objects(ctx, q)
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return keys, nil
		}
		if err != nil {
			return keys, err
		}
		keys = append(keys, a.Name)
	}
}

func (s *gcsStore) del(ctx context.Context, key string) error {
	return s.bucket.Object(key).Delete(ctx)
}

func (s *gcsStore) statusOf(err error) int {
	if errors.Is(err, gcs.ErrObjectNotExist) || errors.Is(err, gcs.ErrBucketNotExist) {
		return http.StatusNotFound
	}
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		return ge.Code
	}
	return 0
}
