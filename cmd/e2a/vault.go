package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/e2a-pipeline/pipeline/workflow"
)

// runVault seals workflow credentials with the vault keys of
// E2A_WORKFLOW_VAULT_KEYS / E2A_WORKFLOW_VAULT_KEY_FILE (the first key
// seals): `key` prints a new key, `seal ID` seals the value read on stdin,
// `rotate FILE` re-seals every value of a credentials file.
func runVault(_ context.Context, _ Config, args []string, in io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("vault", flag.ContinueOnError)
	if err := parseFlags(fs, args, 2); err != nil {
		return err
	}
	bad := func(msg string) error { return usageError(fs, msg) }
	switch {
	case fs.Arg(0) == "key" && fs.NArg() == 1:
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return err
		}
		_, err := fmt.Fprintln(out, base64.StdEncoding.EncodeToString(k))
		return err
	case fs.Arg(0) == "seal" && fs.NArg() == 2 && fs.Arg(1) == "":
		// The id is the seal's additional data, and the vault takes no
		// credential without one: such a value could never be used.
		return bad("seal: an empty credential id")
	case (fs.Arg(0) == "seal" || fs.Arg(0) == "rotate") && fs.NArg() == 2:
	case fs.NArg() == 0:
		return bad("missing action")
	default:
		return bad(fmt.Sprintf("unknown action or arguments %q", fs.Args()))
	}
	c := workflow.Config{VaultKeyFile: os.Getenv(workflow.EnvVaultKeyFile)}
	if s := os.Getenv(workflow.EnvVaultKeys); s != "" {
		c.VaultKeys = strings.Split(s, ",")
	}
	keys, err := c.Keyring()
	if err != nil {
		return err
	}
	if fs.Arg(0) == "rotate" {
		return workflow.RotateVaultFile(fs.Arg(1), keys)
	}
	b, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	sealed, err := keys.Seal(fs.Arg(1), strings.TrimRight(string(b), "\r\n"))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, sealed)
	return err
}
