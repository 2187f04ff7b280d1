package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/e2a-pipeline/pipeline/bridge"
	"github.com/e2a-pipeline/pipeline/bridge/a2abridge"
	"github.com/e2a-pipeline/pipeline/bridge/httpagent"
)

// newUpstream builds the A2A and HTTP upstreams, and for an A2A one the
// function that reads its card again (cardOf; nil for the others).
func newUpstream(ctx context.Context, client *bridge.Client, conv *bridge.Conversations, pool string, u UpstreamConfig, info *bridge.PoolInfo, log *slog.Logger) (bridge.Upstream, cardReader, error) {
	switch u.Kind {
	case upstreamA2A:
		up, err := a2abridge.New(ctx, client, a2abridge.WithConversations(pool, conv), a2abridge.WithLogger(log),
			namedOption("E2A_UPSTREAM_ALLOWED_HOSTS", a2abridge.WithAllowedHosts(u.AllowedHosts)))
		if be := (*bridge.Error)(nil); errors.As(err, &be) && be.Code == bridge.CodeUnreachable && be.Status == 0 {
			return nil, nil, notAnswering(err, u.Kind, client.Location(), "a GET of its agent card")
		}
		if err != nil {
			return nil, nil, err
		}
		describeA2A(info, up.Card())
		return up, up.ReadCard, nil
	case upstreamHTTP:
		if info.Description == "" {
			info.Description = "An HTTP agent behind the E2A Pipeline: durable, resumable, on every A2A binding, ACP and E2A."
		}
		// Each POST carries the conversation's earlier turns.
		up, err := httpagent.New(client, httpagent.WithHistory(pool, conv), httpagent.WithLogger(log))
		return up, nil, err
	}
	return nil, nil, fmt.Errorf("upstream kind %s: not available in this build", u.Kind)
}

// cardReader reads an A2A upstream's card again.
type cardReader func(context.Context) (*a2a.AgentCard, error)

// describeA2A fills the pool's card from the agent's own: its name,
// description, version, skills and modes (the configuration's name,
// description and input modes win: info holds them, or nothing, when
// called). The input modes are also those the A2A doors take in a file
// part to the pool.
func describeA2A(info *bridge.PoolInfo, card *a2a.AgentCard) {
	if info.Name == "" {
		info.Name = card.Name
	}
	if info.Description == "" {
		info.Description = card.Description
	}
	info.Version = card.Version
	if len(info.InputModes) == 0 {
		info.InputModes = card.DefaultInputModes
	}
	info.OutputModes = card.DefaultOutputModes
	for _, s := range card.Skills {
		var m map[string]any
		if b, err := json.Marshal(s); err == nil && json.Unmarshal(b, &m) == nil {
			info.Skills = append(info.Skills, m)
		}
	}
}
