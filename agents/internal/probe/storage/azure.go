package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

type azureStore struct {
	c *container.Client
}

func newAzureStore(t *Target, sec Secret, tr *http.Transport) (*azureStore, error) {
	serviceURL := t.Endpoint
	if serviceURL == "" {
		if sec.AccountName == "" {
			return nil, errors.New("azure: an endpoint or an account name is needed")
		}
		serviceURL = "https://" + sec.AccountName + ".blob.core.windows.net/"
	}
	opts := &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: tr},
		// A negative count means one try: the cycle applies seed 000's retry rule itself.
		Retry:     policy.RetryOptions{MaxRetries: -1},
		Telemetry: policy.TelemetryOptions{Disabled: true},
	}}
	var (
		svc *azblob.Client
		err error
	)
	switch {
	case sec.AccountKey != "":
		cred, cerr := azblob.NewSharedKeyCredential(sec.AccountName, sec.AccountKey)
		if cerr != nil {
			return nil, cerr
		}
		svc, err = azblob.NewClientWithSharedKeyCredential(serviceURL, cred, opts)
	case sec.SASToken != "":
		sep := "?"
		if strings.Contains(serviceURL, "?") {
			sep = "&"
		}
		svc, err = azblob.NewClientWithNoCredential(serviceURL+sep+strings.TrimPrefix(sec.SASToken, "?"), opts)
	default:
		svc, err = azblob.NewClientWithNoCredential(serviceURL, opts)
	}
	if err != nil {
		return nil, err
	}
	return &azureStore{c: svc.ServiceClient().NewContainerClient(t.Bucket)}, nil
}

func (s *azureStore) put(ctx context.Context, key string, body []byte) error {
	// Put Blob: one request for the whole object, as S3's PutObject.
	_, err := s.c.NewBlockBlobClient(key).Upload(ctx, streaming.NopCloser(bytes.NewReader(body)), nil)
	return err
}

func (s *azureStore) get(ctx context.Context, key string, sink func(io.Reader) error) error {
	resp, err := s.c.NewBlobClient(key).DownloadStream(ctx, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return sink(resp.Body)
}

func (s *azureStore) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s.c.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	for p.More() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return keys, err
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name != nil {
				keys = append(keys, *b.Name)
			}
		}
	}
	return keys, nil
}

func (s *azureStore) del(ctx context.Context, key string) error {
	_, err := s.c.NewBlobClient(key).Delete(ctx, nil)
	return err
}

func (s *azureStore) statusOf(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}
