package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

type s3Store struct {
	c      *s3.Client
	bucket string
}

func newS3Store(t *Target, sec Secret, tr *http.Transport) (*s3Store, error) {
	opts := s3.Options{
		Region:       t.Region,
		UsePathStyle: t.PathStyle,
		HTTPClient:   &http.Client{Transport: tr},
		Retryer:      aws.NopRetryer{},
		// One request per operation: no 100-continue round trip, no extra checksum pass.
		ContinueHeaderThresholdBytes: -1,
		RequestChecksumCalculation:   aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation:   aws.ResponseChecksumValidationWhenRequired,
	}
	if t.Endpoint != "" {
		opts.BaseEndpoint = aws.String(t.Endpoint)
	}
	if sec.AccessKeyID != "" {
		opts.Credentials = credentials.NewStaticCredentialsProvider(sec.AccessKeyID, sec.SecretAccessKey, sec.SessionToken)
	} else {
		opts.Credentials = aws.AnonymousCredentials{}
	}
	return &s3Store{c: s3.New(opts), bucket: t.Bucket}, nil
}

func (s *s3Store) put(ctx context.Context, key string, body []byte) error {
	_, err := s.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
		ContentType:   aws.String("application/octet-stream"),
	})
	return err
}

func (s *s3Store) get(ctx context.Context, key string, sink func(io.Reader) error) error {
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	return sink(out.Body)
}

func (s *s3Store) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return keys, err
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

func (s *s3Store) del(ctx context.Context, key string) error {
	_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	return err
}

func (s *s3Store) statusOf(err error) int {
	var nsk *s3types.NoSuchKey
	var nsb *s3types.NoSuchBucket
	if errors.As(err, &nsk) || errors.As(err, &nsb) {
		return http.StatusNotFound
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}
