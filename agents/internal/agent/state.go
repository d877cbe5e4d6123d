package agent

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
)

// State is what enrollment leaves behind: kept in the state directory, readable by the
// agent's user only, since the token is the agent's credential.
type State struct {
	AgentID    string `json:"agent_id"`
	AgentToken string `json:"agent_token"`
	OrgID      string `json:"org_id"`
	Name       string `json:"name"`
	APIURL     string `json:"api_url"`
}

const stateFile = "agent.json"

// LoadState reads the state; ok is false when the agent has not enrolled yet.
func LoadState(dir string) (st State, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, false, err
	}
	if st.AgentID == "" || st.AgentToken == "" {
		return st, false, errors.New(stateFile + ": missing agent_id or agent_token")
	}
	return st, true, nil
}

// SaveState writes the state atomically with mode 0600 in a 0700 directory.
func SaveState(dir string, st State) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	_ = os.Chmod(dir, 0o700)
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}
