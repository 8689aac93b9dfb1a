package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"

	apiclient "github.com/refinery-bandits/refinery/api/client"
)

// apiKeyEnv is the environment variable every command that talks to a
// service reads its API key from when --api-key is not given.
const apiKeyEnv = "REFINERY_API_KEY"

// apiKeyUsage is the --api-key line of those commands' usage.
const apiKeyUsage = `  --api-key SECRET  API key sent as "Authorization: Bearer SECRET" to a service
                    that requires keys (default $REFINERY_API_KEY)
`

// serviceFlags are the flags of a command that talks to a service: its
// URL and the API key to send.
type serviceFlags struct {
	url, apiKey string
}

// register defines --url (default def) and --api-key (default
// $REFINERY_API_KEY) on fs.
func (s *serviceFlags) register(fs *flag.FlagSet, def string) {
	fs.StringVar(&s.url, "url", def, "base URL of the service")
	fs.StringVar(&s.apiKey, "api-key", os.Getenv(apiKeyEnv), `API key sent as "Authorization: Bearer SECRET" to a service that requires keys (default $`+apiKeyEnv+`)`)
}

// client returns a client of the service that sends the key; hc nil is
// the client's default. A bad --url is a usage error.
func (s *serviceFlags) client(hc *http.Client) (*apiclient.Client, error) {
	cl, err := apiclient.New(s.url, hc)
	if err != nil {
		return nil, usageError{fmt.Errorf("--url: %w", err)}
	}
	return cl.WithAPIKey(s.apiKey), nil
}
