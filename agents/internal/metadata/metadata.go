// Package metadata finds out where the agent runs from the AWS (IMDSv2), GCP and Azure
// instance metadata services, with short timeouts, and lets the config override any field.
package metadata

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"stormwatch/agents/internal/client"
)

// Endpoints are the metadata service base URLs; tests point them at local servers.
type Endpoints struct {
	AWS   string
	GCP   string
	Azure string
}

// DefaultEndpoints are the link-local addresses the clouds serve.
var DefaultEndpoints = Endpoints{
	AWS:   "http://169.254.169.254",
	GCP:   "http://metadata.google.internal",
	Azure: "http://169.254.169.254",
}

// Detector queries the metadata services.
type Detector struct {
	Endpoints Endpoints
	Timeout   time.Duration // for the whole detection
	HTTP      *http.Client
}

// Detect asks the three clouds at once and returns the first answer; with none it returns
// an empty Metadata and an error describing each failure.
func (d Detector) Detect(ctx context.Context) (client.Metadata, error) {
	if d.Timeout <= 0 {
		d.Timeout = 2 * time.Second
	}
	if d.HTTP == nil {
		// Metadata services are link-local: never go through a proxy to reach them.
		tr := &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: d.Timeout}).DialContext}
		d.HTTP = &http.Client{Transport: tr}
	}
	ctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	type result struct {
		md  client.Metadata
		err error
	}
	probes := []func(context.Context) (client.Metadata, error){d.aws, d.gcp, d.azure}
	ch := make(chan result, len(probes))
	for _, p := range probes {
		go func() {
			md, err := p(ctx)
			ch <- result{md, err}
		}()
	}
	var errs []error
	for range probes {
		r := <-ch
		if r.err == nil {
			return r.md, nil
		}
		errs = append(errs, r.err)
	}
	return client.Metadata{}, errors.Join(errs...)
}

func (d Detector) get(ctx context.Context, url string, hdr map[string]string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := d.HTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return strings.TrimSpace(string(b)), nil
}

// aws uses IMDSv2: a session token from PUT /latest/api/token, then GETs with it.
func (d Detector) aws(ctx context.Context) (client.Metadata, error) {
	var md client.Metadata
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, d.Endpoints.AWS+"/latest/api/token", nil)
	if err != nil {
		return md, err
	}
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	resp, err := d.HTTP.Do(req)
	if err != nil {
		return md, fmt.Errorf("aws: %w", err)
	}
	tok, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(tok) == 0 {
		return md, fmt.Errorf("aws: token: HTTP %d", resp.StatusCode)
	}
	h := map[string]string{"X-aws-ec2-metadata-token": string(tok)}
	base := d.Endpoints.AWS + "/latest/meta-data/"
	get := func(p string) string { v, _ := d.get(ctx, base+p, h); return v }
	md.Provider = "aws"
	if md.Zone, err = d.get(ctx, base+"placement/availability-zone", h); err != nil {
		return client.Metadata{}, fmt.Errorf("aws: %w", err)
	}
	md.Region = get("placement/region")
	if md.Region == "" && len(md.Zone) > 1 {
		md.Region = md.Zone[:len(md.Zone)-1]
	}
	md.InstanceType = get("instance-type")
	md.PrivateIP = get("local-ipv4")
	md.PublicIP = get("public-ipv4")
	if mac := get("mac"); mac != "" {
		md.Subnet = get("network/interfaces/macs/" + mac + "/subnet-id")
	}
	return md, nil
}

// gcp reads the instance's zone, machine type and first interface. GCP has no subnet id in
// the metadata, so the subnet is the network with the interface's CIDR.
func (d Detector) gcp(ctx context.Context) (client.Metadata, error) {
	var md client.Metadata
	h := map[string]string{"Metadata-Flavor": "Google"}
	base := d.Endpoints.GCP + "/computeMetadata/v1/instance/"
	zone, err := d.get(ctx, base+"zone", h)
	if err != nil {
		return md, fmt.Errorf("gcp: %w", err)
	}
	get := func(p string) string { v, _ := d.get(ctx, base+p, h); return v }
	md.Provider = "gcp"
	md.Zone = last(zone) // projects/123/zones/us-central1-a
	if i := strings.LastIndex(md.Zone, "-"); i > 0 {
		md.Region = md.Zone[:i]
	}
	md.InstanceType = last(get("machine-type"))
	md.PrivateIP = get("network-interfaces/0/ip")
	md.PublicIP = get("network-interfaces/0/access-configs/0/external-ip")
	network := last(get("network-interfaces/0/network"))
	if ip, mask := net.ParseIP(md.PrivateIP), net.ParseIP(get("network-interfaces/0/subnetmask")); ip != nil && mask != nil && ip.To4() != nil && mask.To4() != nil {
		n := net.IPNet{IP: ip.To4().Mask(net.IPMask(mask.To4())), Mask: net.IPMask(mask.To4())}
		md.Subnet = strings.TrimPrefix(network+"/"+n.String(), "/")
	}
	return md, nil
}

func last(s string) string {
	if i := strings.LastIndex(s, "/"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// azure reads the instance metadata document. Azure zones are "1", "2", "3" per region, so
// the zone is qualified with the region to stay unique.
func (d Detector) azure(ctx context.Context) (client.Metadata, error) {
	var md client.Metadata
	body, err := d.get(ctx, d.Endpoints.Azure+"/metadata/instance?api-version=2021-02-01", map[string]string{"Metadata": "true"})
	if err != nil {
		return md, fmt.Errorf("azure: %w", err)
	}
	var doc struct {
		Compute struct {
			Location string `json:"location"`
			Zone     string `json:"zone"`
			VMSize   string `json:"vmSize"`
		} `json:"compute"`
		Network struct {
			Interface []struct {
				IPv4 struct {
					IPAddress []struct {
						PrivateIPAddress string `json:"privateIpAddress"`
						PublicIPAddress  string `json:"publicIpAddress"`
					} `json:"ipAddress"`
					Subnet []struct {
						Address string `json:"address"`
						Prefix  string `json:"prefix"`
					} `json:"subnet"`
				} `json:"ipv4"`
			} `json:"interface"`
		} `json:"network"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		return md, fmt.Errorf("azure: %w", err)
	}
	if doc.Compute.Location == "" {
		return md, errors.New("azure: no location in the metadata document")
	}
	md.Provider = "azure"
	md.Region = doc.Compute.Location
	md.Zone = doc.Compute.Location
	if doc.Compute.Zone != "" {
		md.Zone = doc.Compute.Location + "-" + doc.Compute.Zone
	}
	md.InstanceType = doc.Compute.VMSize
	if len(doc.Network.Interface) > 0 {
		v4 := doc.Network.Interface[0].IPv4
		if len(v4.IPAddress) > 0 {
			md.PrivateIP = v4.IPAddress[0].PrivateIPAddress
			md.PublicIP = v4.IPAddress[0].PublicIPAddress
		}
		if len(v4.Subnet) > 0 && v4.Subnet[0].Address != "" {
			md.Subnet = v4.Subnet[0].Address + "/" + v4.Subnet[0].Prefix
		}
	}
	return md, nil
}

// Override replaces every field of md that o sets.
func Override(md, o client.Metadata) client.Metadata {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&md.Provider, o.Provider)
	set(&md.Region, o.Region)
	set(&md.Zone, o.Zone)
	set(&md.Subnet, o.Subnet)
	set(&md.InstanceType, o.InstanceType)
	set(&md.PrivateIP, o.PrivateIP)
	set(&md.PublicIP, o.PublicIP)
	return md
}

// OutboundIP is the local address used to reach host, a fallback private IP off-cloud.
func OutboundIP(host string) string {
	c, err := net.Dial("udp", net.JoinHostPort(host, "9"))
	if err != nil {
		return ""
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

// InterfaceSubnet is the network prefix ("10.1.0.0/24") of the interface that holds ip, or ""
// when no interface of this host has it.
func InterfaceSubnet(ip string) string {
	want := net.ParseIP(ip)
	if want == nil {
		return ""
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(want) {
				return (&net.IPNet{IP: n.IP.Mask(n.Mask), Mask: n.Mask}).String()
			}
		}
	}
	return ""
}
