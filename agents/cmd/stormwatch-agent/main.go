// Command stormwatch-agent measures cloud latency and ships it to a Stormwatch API.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"stormwatch/agents/internal/agent"
	"stormwatch/agents/internal/client"
	"stormwatch/agents/internal/config"
	"stormwatch/agents/internal/probe/storage"
	"stormwatch/agents/internal/sample"

	"gopkg.in/yaml.v3"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

const usage = `usage: stormwatch-agent <command> [flags]

commands:
  run           enroll on first start, then measure and ship until SIGTERM
  enroll        enroll (again) with the enrollment token and save the agent token
  check-config  validate the configuration and print it with secrets hidden
  metadata      print the detected cloud metadata, overrides applied
  version       print the version

flags (each also as STORMWATCH_<NAME> in the environment; run "stormwatch-agent run -h"):
  -config FILE  YAML configuration (STORMWATCH_CONFIG)
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, version)
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "run", "enroll", "check-config", "metadata":
	default:
		fmt.Fprintf(stderr, "unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	cfg, err := config.Load(rest, os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "configuration: %v\n", err)
		return 2
	}
	log := newLogger(stderr, cfg.LogLevel)
	deps := agent.Deps{Version: version, Logger: log,
		NewStorage: func(emit func(sample.Storage), l *slog.Logger) agent.StorageManager {
			return storage.NewManager(emit, l)
		}}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	switch cmd {
	case "check-config":
		shown := cfg
		if shown.EnrollmentToken != "" {
			shown.EnrollmentToken = shown.EnrollmentToken[:min(len(shown.EnrollmentToken), 12)] + "..."
		}
		out, err := yaml.Marshal(shown)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		_, _ = stdout.Write(out)
		fmt.Fprintln(stdout, "# configuration is valid")
		return 0
	case "metadata":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(agent.Metadata(ctx, cfg, deps))
		return 0
	case "enroll":
		c, err := client.New(cfg.APIURL, cfg.CAFile, version)
		if err != nil {
			log.Error("enroll", "err", err)
			return 1
		}
		md := agent.Metadata(ctx, cfg, deps)
		addr := cfg.Mesh.Advertise
		if addr == "" {
			_, port, _ := net.SplitHostPort(cfg.Mesh.Listen)
			addr = net.JoinHostPort(md.PrivateIP, port)
		}
		st, err := agent.Enroll(ctx, cfg, c, md, addr, deps)
		if err != nil {
			log.Error("enroll", "err", err)
			return 1
		}
		fmt.Fprintf(stdout, "enrolled as %s (%s); state saved in %s\n", st.Name, st.AgentID, cfg.StateDir)
		return 0
	}
	if err := agent.Run(ctx, cfg, deps); err != nil {
		if errors.Is(err, agent.ErrAgentDeleted) {
			return exitDeleted
		}
		log.Error("agent failed", "err", err)
		return 1
	}
	return 0
}

// exitDeleted is the exit status when the API says this agent was deleted: a supervisor
// should not restart it until it is enrolled again (docs/agents.md).
const exitDeleted = 3

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
