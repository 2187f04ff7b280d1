// Command a2e-vault seals workflow credentials with the vault keys of
// E2A_WORKFLOW_VAULT_KEYS / E2A_WORKFLOW_VAULT_KEY_FILE (the first key
// seals):
//
//	a2e-vault key                    print a new random key (base64)
//	a2e-vault seal <credential-id>   read a value on stdin, print it sealed
//	a2e-vault rotate <file>          (re-)seal every value of a credentials file with the first key
package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/e2a-pipeline/pipeline/workflow"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "a2e-vault:", err)
		os.Exit(1)
	}
}

func run(args []string, in io.Reader, out io.Writer) error {
	if len(args) == 1 && args[0] == "key" {
		k := make([]byte, 32)
		if _, err := rand.Read(k); err != nil {
			return err
		}
		_, err := fmt.Fprintln(out, base64.StdEncoding.EncodeToString(k))
		return err
	}
	if len(args) != 2 || (args[0] != "seal" && args[0] != "rotate") {
		return fmt.Errorf("usage: a2e-vault key | seal <credential-id> | rotate <credentials-file>")
	}
	c := workflow.Config{VaultKeyFile: os.Getenv(workflow.EnvVaultKeyFile)}
	if s := os.Getenv(workflow.EnvVaultKeys); s != "" {
		c.VaultKeys = strings.Split(s, ",")
	}
	keys, err := c.Keyring()
	if err != nil {
		return err
	}
	if args[0] == "rotate" {
		return workflow.RotateVaultFile(args[1], keys)
	}
	b, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	sealed, err := keys.Seal(args[1], strings.TrimRight(string(b), "\r\n"))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(out, sealed)
	return err
}
