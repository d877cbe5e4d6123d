package storage

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gcs "cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/option"
)

// Azurite's well-known development account (documented by Azurite, not a secret).
const (
	azuriteAccount = "devstoreaccount1"
	azuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// requireEmulators is set by scripts/test.sh (`make test`): there a missing emulator fails
// the tests that need it; a bare `go test` on a machine without them skips those tests.
var requireEmulators = os.Getenv("STORMWATCH_REQUIRE_EMULATORS") != "" && os.Getenv("STORMWATCH_REQUIRE_EMULATORS") != "0"

// emulator is one running object-storage emulator, or why it is missing.
type emulator struct {
	provider string
	endpoint string
	problem  string // why it is unavailable, with its install output and log
	// S3 only: keys of an IAM user moto authenticates once auth is switched on.
	accessKeyID, secretKey string
}

var emulators = map[string]*emulator{}

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		// The crash test re-runs this binary as an agent to be killed mid-cycle.
		crashChild()
		return
	}
	os.Exit(runWithEmulators(m))
}

func runWithEmulators(m *testing.M) int {
	scripts, _ := filepath.Abs("../../../../scripts/emulators")
	rundir, err := os.MkdirTemp("", "stormwatch-emulators-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(rundir)
	defer exec.Command(filepath.Join(scripts, "stop.sh"), rundir).Run()
	for _, e := range []struct{ provider, name string }{{ProviderS3, "moto"}, {ProviderAzure, "azurite"}, {ProviderGCS, "fakegcs"}} {
		em := &emulator{provider: e.provider}
		emulators[e.provider] = em
		var stderr bytes.Buffer
		cmd := exec.Command(filepath.Join(scripts, "start.sh"), e.name, rundir)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			em.problem = fmt.Sprintf("%s emulator could not be installed or started (scripts/emulators/start.sh %s): %v\n%s%s",
				e.name, e.name, err, stderr.String(), logTail(filepath.Join(rundir, e.name+".log")))
			continue
		}
		em.endpoint = strings.TrimSpace(string(out))
	}
	if em := emulators[ProviderS3]; em.problem == "" {
		if err := enableMotoAuth(em); err != nil {
			em.problem = "moto auth could not be set up: " + err.Error() + "\n" + logTail(filepath.Join(rundir, "moto.log"))
		}
	}
	return m.Run()
}

// logTail is the end of an emulator's log, for the message of a test that needed it.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no emulator log: " + err.Error() + ")"
	}
	const keep = 4000
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return "emulator log " + path + ":\n" + string(b)
}

// need returns the provider's emulator. When it is unavailable the test fails if
// STORMWATCH_REQUIRE_EMULATORS is set, and is skipped otherwise.
func need(t *testing.T, provider string) *emulator {
	t.Helper()
	em := emulators[provider]
	if em.problem != "" {
		if requireEmulators {
			t.Fatal(em.problem)
		}
		t.Skip(em.problem + "\n(set STORMWATCH_REQUIRE_EMULATORS=1 to make this a failure)")
	}
	return em
}

// enableMotoAuth creates an IAM user allowed everything, then makes moto check every
// request's signature, so wrong credentials are refused as on AWS.
func enableMotoAuth(em *emulator) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := iam.New(iam.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(em.endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("setup", "setup", ""),
	})
	if _, err := c.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String("prober")}); err != nil {
		return err
	}
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`
	if _, err := c.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String("prober"), PolicyName: aws.String("all"), PolicyDocument: aws.String(policy)}); err != nil {
		return err
	}
	key, err := c.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String("prober")})
	if err != nil {
		return err
	}
	em.accessKeyID, em.secretKey = aws.ToString(key.AccessKey.AccessKeyId), aws.ToString(key.AccessKey.SecretAccessKey)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, em.endpoint+"/moto-api/reset-auth", strings.NewReader("0"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reset-auth answered %s", resp.Status)
	}
	return nil
}

// createBucket makes a bucket (a container on Azure) directly with the provider's SDK.
func createBucket(t *testing.T, em *emulator, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	switch em.provider {
	case ProviderS3:
		c := s3.New(s3.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(em.endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(em.accessKeyID, em.secretKey, ""),
		})
		_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	case ProviderAzure:
		cred, cerr := azblob.NewSharedKeyCredential(azuriteAccount, azuriteKey)
		if cerr != nil {
			t.Fatal(cerr)
		}
		c, cerr := azblob.NewClientWithSharedKeyCredential(em.endpoint, cred,
			&azblob.ClientOptions{ClientOptions: azcore.ClientOptions{Retry: policy.RetryOptions{MaxRetries: -1}}})
		if cerr != nil {
			t.Fatal(cerr)
		}
		_, err = c.CreateContainer(ctx, name, nil)
	case ProviderGCS:
		c, cerr := gcs.NewClient(ctx, option.WithEndpoint(em.endpoint+"/storage/v1/"), option.WithoutAuthentication())
		if cerr != nil {
			t.Fatal(cerr)
		}
		defer c.Close()
		err = c.Bucket(name).Create(ctx, "stormwatch-test", nil)
	}
	if err != nil {
		t.Fatalf("creating %s bucket %s: %v", em.provider, name, err)
	}
}

// bucketName is unique per test, lower-case and valid on all three providers.
func bucketName(t *testing.T) string {
	var b strings.Builder
	for _, r := range strings.ToLower(t.Name()) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	name := b.String()
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return fmt.Sprintf("sw%s%d", name, time.Now().UnixNano()%1_000_000)
}

// targetFor returns a valid target for the emulator; over overrides top-level fields.
func targetFor(em *emulator, bucket string, over map[string]any) map[string]any {
	t := map[string]any{
		"target_id":     "t-" + em.provider + "-" + bucket,
		"provider":      em.provider,
		"endpoint":      em.endpoint,
		"bucket":        bucket,
		"prefix":        "probe/agent-1/",
		"interval_s":    3600,
		"op_timeout_ms": 10000,
		"contents":      []string{"binary", "text"},
		"sizes_bytes":   map[string]any{"binary": []int64{1 << 10, 10 << 10, 100 << 10, 1 << 20}, "text": []int64{1 << 10, 100 << 10}},
		"variants":      map[string]any{},
	}
	switch em.provider {
	case ProviderS3:
		t["region"] = "us-east-1"
		t["path_style"] = true
		t["credentials"] = map[string]any{"source": "inline", "access_key_id": em.accessKeyID, "secret_access_key": em.secretKey}
	case ProviderAzure:
		t["credentials"] = map[string]any{"source": "inline", "account_name": azuriteAccount, "account_key": azuriteKey}
	case ProviderGCS:
		t["credentials"] = map[string]any{"source": "none"}
	}
	for k, v := range over {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = v
		}
	}
	return t
}
