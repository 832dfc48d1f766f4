// The Temporal server hold-sweeper's clusters run: the stock server of deploy/temporal/server-version with one
// difference, the authorizer (authorizer.go, allowing what cluster-rights.json lists). Same flags and config files as the upstream binary
// (`--root --config --env [--zone] start --service ...`, `render-config`), so every command in docs/cluster.md works with either.
package main

import (
	"bytes"
	"fmt"
	"os"
	"path"

	"github.com/urfave/cli/v2"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/headers"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/temporal"
)

func main() {
	app := cli.NewApp()
	app.Name = "hold-sweeper-temporal"
	app.Usage = "Temporal server with hold-sweeper's authorizer"
	app.Version = headers.ServerVersion
	app.Flags = []cli.Flag{
		&cli.StringFlag{Name: "root", Aliases: []string{"r"}, Value: ".", EnvVars: []string{config.EnvKeyRoot}},
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: "config", EnvVars: []string{config.EnvKeyConfigDir}},
		&cli.StringFlag{Name: "env", Aliases: []string{"e"}, Value: "development", EnvVars: []string{config.EnvKeyEnvironment}},
		&cli.StringFlag{Name: "zone", Aliases: []string{"az"}, EnvVars: []string{config.EnvKeyAvailabilityZone}},
		&cli.BoolFlag{Name: "allow-no-auth", Usage: "start without authorization (global.authorization.jwtKeyProvider unset)", EnvVars: []string{config.EnvKeyAllowNoAuth}},
	}
	app.Commands = []*cli.Command{{
		Name:  "render-config",
		Usage: "Print the configuration the server would run with (config.yaml rendered from the environment)",
		Action: func(c *cli.Context) error {
			cfg, err := config.LoadConfig(c.String("env"), path.Join(c.String("root"), c.String("config")), c.String("zone"))
			if err != nil {
				return cli.Exit(fmt.Sprintf("unable to load configuration: %v", err), 1)
			}
			fmt.Println(cfg.String())
			return nil
		},
	}, {
		Name:  "start",
		Usage: "Start Temporal server",
		Flags: []cli.Flag{&cli.StringSliceFlag{Name: "service", Aliases: []string{"svc"}, Value: cli.NewStringSlice(temporal.DefaultServices...)}},
		Action: func(c *cli.Context) error {
			if err := start(c); err != nil {
				return cli.Exit(err.Error(), 1)
			}
			return cli.Exit("All services are stopped.", 0)
		},
	}}
	_ = app.Run(os.Args)
}

func start(c *cli.Context) error {
	cfg, err := config.LoadConfig(c.String("env"), path.Join(c.String("root"), c.String("config")), c.String("zone"))
	if err != nil {
		return fmt.Errorf("unable to load configuration: %w", err)
	}
	logger := log.NewZapLogger(log.BuildZapLogger(cfg.Log))

	// `authorizer: hold-sweeper` is this binary's (authorizer.go); the stock names work as upstream. An authorizer
	// with an empty claim mapper would make every caller a system admin, so that is refused, and a cluster without
	// an authorizer must be started with --allow-no-auth, said on purpose.
	auth := &cfg.Global.Authorization
	var authorizer authorization.Authorizer
	switch auth.Authorizer {
	case "hold-sweeper":
		if authorizer, err = newHoldSweeperAuthorizer(logger); err != nil {
			return err
		}
	case "":
		if !c.Bool("allow-no-auth") {
			return fmt.Errorf("global.authorization.authorizer is empty: every caller could do anything; configure it, or start with --allow-no-auth on purpose")
		}
		authorizer = authorization.NewNoopAuthorizer()
	default:
		if authorizer, err = authorization.GetAuthorizerFromConfig(auth); err != nil {
			return fmt.Errorf("unable to instantiate authorizer: %w", err)
		}
	}
	if auth.Authorizer != "" && auth.ClaimMapper == "" {
		return fmt.Errorf("global.authorization.authorizer %q with an empty claimMapper makes every caller a system admin: set claimMapper: default", auth.Authorizer)
	}
	if err := checkTLS(cfg); err != nil {
		return err
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&cfg.Global.Authorization, logger)
	if err != nil {
		return fmt.Errorf("unable to instantiate claim mapper: %w", err)
	}
	audienceMapper, err := authorization.GetAudienceMapperFromConfig(&cfg.Global.Authorization)
	if err != nil {
		return fmt.Errorf("unable to instantiate audience mapper: %w", err)
	}

	var dynamicConfigClient dynamicconfig.Client = dynamicconfig.NewNoopClient()
	if cfg.DynamicConfigClient != nil {
		if dynamicConfigClient, err = dynamicconfig.NewFileBasedClient(cfg.DynamicConfigClient, logger, temporal.InterruptCh()); err != nil {
			return fmt.Errorf("unable to create dynamic config client: %w", err)
		}
	}

	server, err := temporal.NewServer(
		temporal.ForServices(c.StringSlice("service")),
		temporal.WithConfig(cfg),
		temporal.WithDynamicConfigClient(dynamicConfigClient),
		temporal.WithLogger(logger),
		temporal.InterruptOn(temporal.InterruptCh()),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithAudienceGetter(func(*config.Config) authorization.JWTAudienceMapper { return audienceMapper }),
	)
	if err != nil {
		return fmt.Errorf("unable to create server: %w", err)
	}
	return server.Start()
}

// checkTLS refuses two configurations that look locked and are not. Authorization without TLS on the frontend: every
// token would cross the network in clear, and whoever reads one acts with it. And an internode TLS that trusts a CA
// the frontend's clients hold certificates of: the internal-frontend authenticates by internode TLS alone and makes
// every caller a system admin, so any client certificate would open the whole cluster there.
func checkTLS(cfg *config.Config) error {
	tls := &cfg.Global.TLS
	if cfg.Global.Authorization.Authorizer != "" && !tls.Frontend.IsServerEnabled() {
		return fmt.Errorf("global.authorization is on but global.tls.frontend.server is not set: tokens would cross in clear; configure the frontend's TLS (TEMPORAL_TLS_FRONTEND_CERT_FILE, TEMPORAL_TLS_FRONTEND_KEY_FILE)")
	}
	if !tls.Internode.IsServerEnabled() || !tls.Frontend.IsServerEnabled() {
		return nil
	}
	clientCAs, err := readAll(tls.Frontend.Server.ClientCAFiles, tls.Frontend.Server.ClientCAData)
	if err != nil {
		return err
	}
	internodeCAs, err := readAll(tls.Internode.Server.ClientCAFiles, tls.Internode.Server.ClientCAData)
	if err != nil {
		return err
	}
	for _, internode := range internodeCAs {
		for _, client := range clientCAs {
			if bytes.Equal(bytes.TrimSpace(internode), bytes.TrimSpace(client)) {
				return fmt.Errorf("global.tls.internode trusts a CA the frontend's clients present certificates of: every client certificate would pass the internal-frontend as a system admin; give internode TLS its own CA (TEMPORAL_TLS_INTERNODE_CA_FILE)")
			}
		}
	}
	return nil
}

func readAll(files []string, data []string) ([][]byte, error) {
	out := make([][]byte, 0, len(files)+len(data))
	for _, file := range files {
		content, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading CA file %s: %w", file, err)
		}
		out = append(out, content)
	}
	for _, d := range data {
		out = append(out, []byte(d))
	}
	return out, nil
}
