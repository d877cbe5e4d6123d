package metadata

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"stormwatch/agents/internal/client"
)

func fakeAWS(t *testing.T) string {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /latest/api/token", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte("tok123"))
	})
	vals := map[string]string{
		"placement/availability-zone": "us-east-1a", "placement/region": "us-east-1",
		"instance-type": "c5.xlarge", "local-ipv4": "10.0.1.5", "public-ipv4": "3.1.2.3",
		"mac": "0e:aa", "network/interfaces/macs/0e:aa/subnet-id": "subnet-0abc",
	}
	mux.HandleFunc("GET /latest/meta-data/{path...}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-aws-ec2-metadata-token") != "tok123" {
			w.WriteHeader(http.StatusUnauthorized) // IMDSv2 only: v1 requests are refused
			return
		}
		v, ok := vals[r.PathValue("path")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(v))
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

func fakeGCP(t *testing.T) string {
	vals := map[string]string{
		"zone": "projects/123/zones/europe-west1-b", "machine-type": "projects/123/machineTypes/e2-standard-2",
		"network-interfaces/0/ip": "10.132.0.7", "network-interfaces/0/subnetmask": "255.255.240.0",
		"network-interfaces/0/network":                      "projects/123/networks/default",
		"network-interfaces/0/access-configs/0/external-ip": "34.1.2.3",
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata-Flavor") != "Google" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		v, ok := vals[r.URL.Path[len("/computeMetadata/v1/instance/"):]]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(v))
	}))
	t.Cleanup(s.Close)
	return s.URL
}

func fakeAzure(t *testing.T) string {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Metadata") != "true" || r.URL.Path != "/metadata/instance" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"compute":{"location":"eastus","zone":"2","vmSize":"Standard_D2s_v3"},
		"network":{"interface":[{"ipv4":{"ipAddress":[{"privateIpAddress":"10.1.0.4","publicIpAddress":"20.1.2.3"}],
		"subnet":[{"address":"10.1.0.0","prefix":"24"}]}}]}}`))
	}))
	t.Cleanup(s.Close)
	return s.URL
}

// nothing answers like a host without a metadata service: connection refused.
func nothing(t *testing.T) string {
	s := httptest.NewServer(http.NotFoundHandler())
	url := s.URL
	s.Close()
	return url
}

// hanging never answers, like a firewalled link-local address.
func hanging(t *testing.T) string {
	block := make(chan struct{})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(block); s.Close() })
	return s.URL
}

func TestEachCloudIsDetectedFromItsMetadataService(t *testing.T) {
	tests := []struct {
		name string
		ep   func(t *testing.T) Endpoints
		want client.Metadata
	}{
		{"aws", func(t *testing.T) Endpoints { return Endpoints{AWS: fakeAWS(t), GCP: nothing(t), Azure: nothing(t)} },
			client.Metadata{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a", Subnet: "subnet-0abc",
				InstanceType: "c5.xlarge", PrivateIP: "10.0.1.5", PublicIP: "3.1.2.3"}},
		{"gcp", func(t *testing.T) Endpoints { return Endpoints{AWS: nothing(t), GCP: fakeGCP(t), Azure: nothing(t)} },
			client.Metadata{Provider: "gcp", Region: "europe-west1", Zone: "europe-west1-b", Subnet: "default/10.132.0.0/20",
				InstanceType: "e2-standard-2", PrivateIP: "10.132.0.7", PublicIP: "34.1.2.3"}},
		{"azure", func(t *testing.T) Endpoints { return Endpoints{AWS: nothing(t), GCP: nothing(t), Azure: fakeAzure(t)} },
			client.Metadata{Provider: "azure", Region: "eastus", Zone: "eastus-2", Subnet: "10.1.0.0/24",
				InstanceType: "Standard_D2s_v3", PrivateIP: "10.1.0.4", PublicIP: "20.1.2.3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detector{Endpoints: tc.ep(t), Timeout: 2 * time.Second}.Detect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDetectionGivesUpAtItsTimeoutWhenNothingAnswers(t *testing.T) {
	ep := Endpoints{AWS: hanging(t), GCP: hanging(t), Azure: nothing(t)}
	done := make(chan error, 1)
	go func() {
		_, err := Detector{Endpoints: ep, Timeout: 200 * time.Millisecond}.Detect(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("detected a cloud where there is none")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("detection did not respect its timeout")
	}
}

func TestOverridesReplaceDetectedFields(t *testing.T) {
	md := Override(client.Metadata{Provider: "aws", Region: "us-east-1", Zone: "us-east-1a"}, client.Metadata{Zone: "use1-az1", PublicIP: "1.2.3.4"})
	if md.Provider != "aws" || md.Zone != "use1-az1" || md.PublicIP != "1.2.3.4" || md.Region != "us-east-1" {
		t.Fatalf("%+v", md)
	}
}

func TestInterfaceSubnetIsThePrefixOfTheInterfaceHoldingTheAddress(t *testing.T) {
	if got := InterfaceSubnet("127.0.0.1"); got != "127.0.0.0/8" {
		t.Fatalf("loopback: %q, want 127.0.0.0/8", got)
	}
	// TEST-NET-3: no interface here holds it, and a non-address names nothing either.
	for _, ip := range []string{"203.0.113.7", "not-an-ip", ""} {
		if got := InterfaceSubnet(ip); got != "" {
			t.Fatalf("%q: %q, want no subnet", ip, got)
		}
	}
}
