package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/client"
	"github.com/outpost-edge/outpost/controlplane/console"
	"github.com/outpost-edge/outpost/controlplane/controllers"
	"github.com/outpost-edge/outpost/controlplane/core"
	"github.com/outpost-edge/outpost/controlplane/pki"
	"github.com/outpost-edge/outpost/controlplane/store"
	"github.com/outpost-edge/outpost/controlplane/version"
	"github.com/outpost-edge/outpost/gossip"
	"github.com/outpost-edge/outpost/raftstore"
)

// Errors of this package.
var (
	// ErrConfig is wrapped by every error about a Config that cannot work.
	ErrConfig = errors.New("invalid server configuration")
)

// Namespaces every cluster has (see core).
const (
	NamespaceDefault = core.NamespaceDefault
	NamespaceSystem  = core.NamespaceSystem
)

var (
	namespacesResource = api.ResourceForKind("Namespace")
	tokensResource     = api.ResourceForKind("Token")
	podsResource       = api.ResourceForKind("Pod")
	nodesResource      = api.ResourceForKind("Node")
	machinesResource   = api.ResourceForKind("Machine")
)

// shutdownTimeout bounds how long Close waits for requests in flight.
const shutdownTimeout = 10 * time.Second

// Server is one running control-plane server.
type Server struct {
	// poolMu is held by FleetLock and the machine config controller
	// while either hands out a place in a pool's maxUnavailable.
	poolMu       sync.Mutex
	cfg          Config
	log          *slog.Logger
	secret       string
	adminTokenID string
	ca           *pki.CA
	// console serves the web console's static files at /ui.
	console *console.Handler

	store *store.Store
	node  *raftstore.Node
	// core is the write pipeline, the leadership lifecycle and the reads
	// of the store; the HTTP API and the loops go through it.
	core  *core.Core
	authn *auth.Authenticator
	// schedulers are the policies of the schedulers the leader runs.
	schedulers *schedulerSet

	// gossip is the server's member of the gossip pool; gossipKey its key.
	gossip    *gossip.Pool
	gossipKey []byte
	// servers caches the API URLs agents fail over between (servers.go).
	servers serverURLs
	// liveness holds node heartbeats while this server's leader loops
	// run; nil otherwise (liveness.go).
	liveness atomic.Pointer[liveness]
	// stateCheck compares this server's state hash with its peers'
	// (statehash.go).
	stateCheck *stateCheck
	// zones is the leader's count of the zones (TNT-8), for the API and
	// the metrics; empty while this server does not lead.
	zones *controllers.ZoneReport

	metrics *metrics
	// summaries caches the agents' usage summaries (metricsapi.go).
	summaries      summaries
	metricsHandler http.Handler
	proxy          *httputil.ReverseProxy
	transport      *http.Transport

	httpSrv *http.Server
	url     string
	// admin is the admin client config of the admin token's generation in
	// force (adminGen); adminMu guards both (admintoken.go).
	adminMu  sync.Mutex
	admin    client.Config
	adminGen int

	// stopCtx ends when Close starts: watches and leader duties stop.
	stopCtx context.Context
	stop    context.CancelFunc
	wg      sync.WaitGroup
	// serveErr receives the HTTP server's error if it stops on its own.
	serveErr chan error
	// restartCh asks Wait to end for a restart on another binary.
	restartCh  chan string
	selfUpdate *selfUpdater
	// fatal receives raftstore's OnFatal error: the server must stop.
	fatal chan error

	closeOnce sync.Once
	closeErr  error
}

// Start assembles and starts a server: the cluster CA and this server's
// certificate, the store, the raft member (which forms or joins the
// cluster as Config says, so Start may wait for peers until ctx ends), the
// API listener, the admin client config and the leader duties. ctx bounds
// the start only; Close stops the server.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	cfg, schedulers, err := cfg.check()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	// Before the ports: a second server on the same directory would
	// otherwise be told only that a port is taken.
	if err := raftstore.CheckDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	secret, err := loadSecret(&cfg)
	if err != nil {
		return nil, err
	}
	ca, err := pki.DeriveCA(secret)
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	log := cfg.Logger.With("component", "server", "server_id", cfg.ID)

	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("API listener on %s: %w", cfg.APIAddr, err)
	}
	apiURL := cfg.AdvertiseAPI
	if apiURL == "" {
		scheme := "https"
		if cfg.Insecure {
			scheme = "http"
		}
		apiURL = scheme + "://" + hostPort(advertiseHost(ln.Addr()), ln.Addr().(*net.TCPAddr).Port)
	}
	hosts := certHosts(&cfg, apiURL, ln.Addr())
	cert, err := pki.NewRenewing(func() (tls.Certificate, error) { return ca.IssueServerCert(cfg.ID, hosts, certTTL) })
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	issueBrowser := func() (tls.Certificate, error) { return ca.IssueBrowserServerCert(cfg.ID, hosts, certTTL) }
	if cfg.BrowserCertFile != "" {
		issueBrowser = func() (tls.Certificate, error) { return tls.LoadX509KeyPair(cfg.BrowserCertFile, cfg.BrowserKeyFile) }
	}
	browserCert, err := pki.NewRenewing(issueBrowser)
	if err != nil {
		ln.Close()
		if cfg.BrowserCertFile != "" {
			return nil, fmt.Errorf("%w: --tls-cert-file %s, --tls-private-key-file %s: %w", ErrConfig, cfg.BrowserCertFile, cfg.BrowserKeyFile, err)
		}
		return nil, fmt.Errorf("server certificate for browsers: %w", err)
	}

	st := store.New(store.Options{Logger: cfg.Logger.With("component", "store"), Registerer: cfg.Registry, WatchWindow: cfg.WatchWindow})
	rcfg := raftstore.Config{
		ID:                 cfg.ID,
		DataDir:            cfg.DataDir,
		BindAddr:           cfg.RaftAddr,
		AdvertiseAddr:      cfg.AdvertiseRaft,
		APIAddr:            apiURL,
		BootstrapExpect:    cfg.BootstrapExpect,
		Join:               cfg.Join,
		Insecure:           cfg.Insecure,
		Logger:             cfg.Logger.With("component", "raftstore"),
		Registerer:         cfg.Registry,
		HeartbeatTimeout:   cfg.HeartbeatTimeout,
		ElectionTimeout:    cfg.ElectionTimeout,
		LeaderLeaseTimeout: cfg.LeaderLeaseTimeout,
		CommitTimeout:      cfg.CommitTimeout,
		SnapshotThreshold:  cfg.SnapshotThreshold,
		TrailingLogs:       cfg.TrailingLogs,
		SnapshotInterval:   cfg.SnapshotInterval,
		CatchUpLag:         cfg.CatchUpLag,
		UnsafeNoSync:       cfg.UnsafeNoFsync,
		Dial:               cfg.Dial,
		StateHash:          st.StateHash,
		Version:            version.Version,
	}
	// A command this version cannot apply stops the server (ARCHITECTURE:
	// hard rules); Run returns the error so systemd shows why.
	fatal := make(chan error, 1)
	rcfg.OnFatal = func(err error) {
		select {
		case fatal <- err:
		default:
		}
	}
	if rcfg.AdvertiseAddr == "" {
		rcfg.AdvertiseAddr = defaultRaftAdvertise(cfg.RaftAddr)
	}
	var peerClientTLS *tls.Config
	if !cfg.Insecure {
		rcfg.ServerTLS, rcfg.ClientTLS = pki.PeerTLSConfigs(ca, *cert.Current())
		cert.Use(rcfg.ServerTLS, rcfg.ClientTLS)
		peerClientTLS = rcfg.ClientTLS.Clone()
	}
	// The binary's state is in every raft status answer, so it exists
	// before raft; it learns its server below.
	su := newSelfUpdater(cfg.BinaryDir)
	rcfg.Info = su.Info
	machine := core.FSM(st)
	if cfg.WrapFSM != nil {
		machine = cfg.WrapFSM(machine)
	}
	node, err := raftstore.Open(ctx, rcfg, machine)
	if err != nil {
		ln.Close()
		if errors.Is(err, raftstore.ErrDataDirInUse) {
			return nil, err // says it all; "raft:" would only puzzle
		}
		return nil, fmt.Errorf("raft: %w", err)
	}

	adminID, adminSecret := auth.AdminToken(secret)
	s := &Server{
		cfg:          cfg,
		log:          log,
		secret:       secret,
		adminTokenID: adminID,
		ca:           ca,
		console:      console.New(),
		store:        st,
		schedulers:   schedulers,
		node:         node,
		url:          apiURL,
		serveErr:     make(chan error, 1),
		fatal:        fatal,
		restartCh:    make(chan string, 1),
		selfUpdate:   su,
	}
	su.s = s
	s.core, err = core.New(core.Config{
		Store:           st,
		Node:            node,
		Logger:          log,
		AdminTokenID:    adminID,
		AdminSecretHash: auth.HashSecret(adminSecret),
		EventTTL:        cfg.EventTTL,
		AdmissionConfig: cfg.AdmissionConfig,
		Admission:       cfg.Admission,
		Network:         cfg.Network,
		Seed:            s.seedSchedulerPolicies,
		OnCaughtUp:      s.syncAdminToken,
		Duties:          s.runLoops,
	})
	if err != nil {
		ln.Close()
		_ = node.Close()
		return nil, err
	}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	fail := func(err error) (*Server, error) {
		s.stop()
		if s.gossip != nil {
			_ = s.gossip.Close()
		}
		ln.Close()
		_ = node.Close()
		return nil, err
	}
	s.authn = auth.NewAuthenticator(s.core, nil)
	// The admin token works before the leader has written its Token
	// object, and cannot be locked out by deleting that object.
	if err := s.authn.AddStatic(adminID+"."+adminSecret, adminIdentity); err != nil {
		return fail(fmt.Errorf("admin token: %w", err))
	}
	if err := s.startGossip(ctx); err != nil {
		return fail(err)
	}
	if s.metrics, err = newMetrics(cfg.Registry); err != nil {
		return fail(fmt.Errorf("metrics: %w", err))
	}
	s.zones = controllers.NewZoneReport()
	if err := cfg.Registry.Register(newZoneCollector(s.zones)); err != nil {
		return fail(fmt.Errorf("zone metrics: %w", err))
	}
	if s.stateCheck, err = newStateCheck(cfg.Registry); err != nil {
		return fail(fmt.Errorf("metrics: %w", err))
	}
	s.metricsHandler = newMetricsHandler(s)
	s.proxy, s.transport = s.newProxy(peerClientTLS)

	s.httpSrv = &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		// TLS handshake failures of scanners and misconfigured clients
		// are not worth more than debug.
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if !cfg.Insecure {
		s.httpSrv.TLSConfig = pki.ServerTLSConfig(ca, *cert.Current())
		cert.Use(s.httpSrv.TLSConfig)
		cert.ServeWithFallback(s.httpSrv.TLSConfig, browserCert)
	}
	s.admin = client.Config{Server: apiURL, Token: adminID + "." + adminSecret, Insecure: cfg.Insecure}
	if !cfg.Insecure {
		s.admin.CAData = ca.CertPEM()
	}
	if err := client.WriteConfig(cfg.AdminConfigPath, s.admin); err != nil {
		return fail(fmt.Errorf("admin config: %w", err))
	}

	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		s.core.AwaitCatchUp(s.stopCtx)
	}()
	s.wg.Go(func() { s.runStateChecks(s.stopCtx) })
	s.wg.Go(func() { s.followAdminToken(s.stopCtx) })
	s.wg.Go(func() { s.selfUpdate.run(s.stopCtx) })
	if !cfg.Insecure {
		s.wg.Go(func() { cert.Run(s.stopCtx, log.With("component", "pki")) })
		s.wg.Go(func() { browserCert.Run(s.stopCtx, log.With("component", "pki")) })
	}
	go func() {
		defer s.wg.Done()
		var err error
		if cfg.Insecure {
			err = s.httpSrv.Serve(ln)
		} else {
			err = s.httpSrv.ServeTLS(ln, "", "")
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("API server stopped", "err", err)
			s.serveErr <- err
		}
	}()
	go func() {
		defer s.wg.Done()
		s.core.RunLeadership(s.stopCtx)
	}()
	for _, w := range cfg.AdmissionConfig.Warnings {
		log.Warn("admission config: " + w)
	}
	log.Info("server started", "api", apiURL, "raft", node.Status().RaftAddr, "insecure", cfg.Insecure, "admin_config", cfg.AdminConfigPath)
	return s, nil
}

// defaultRaftAdvertise derives the raft address peers dial from the
// listen address when it names no host; a port-0 or host-specific address
// is left to raftstore, which knows the bound port.
func defaultRaftAdvertise(bind string) string {
	host, port, err := net.SplitHostPort(bind)
	if err != nil || port == "0" {
		return ""
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return ""
	}
	h := firstHostIP()
	if h == "" {
		return ""
	}
	return net.JoinHostPort(h, port)
}

// Close stops the server gracefully: it stops accepting requests, ends
// watches, waits for requests in flight (up to 10s), stops the leader
// duties and closes raft (a leader hands leadership over first). Safe to
// call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.stop()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		err := s.httpSrv.Shutdown(ctx)
		cancel()
		if err != nil {
			err = errors.Join(fmt.Errorf("API shutdown: %w", err), s.httpSrv.Close())
		}
		s.wg.Wait()
		if gerr := s.stopGossip(); gerr != nil {
			err = errors.Join(err, gerr)
		}
		s.transport.CloseIdleConnections()
		if nerr := s.node.Close(); nerr != nil {
			err = errors.Join(err, fmt.Errorf("raft: %w", nerr))
		}
		s.closeErr = err
		s.log.Info("server stopped")
	})
	return s.closeErr
}

// Run starts a server, serves until ctx ends, then closes it. It is what
// `outpost server` and `outpost dev` run.
func Run(ctx context.Context, cfg Config) error {
	s, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	return s.Wait(ctx)
}

// Wait serves until ctx ends or the server fails, re-reading scheduler
// policies on Config.Reload, then closes the server. Run is Start and
// Wait; `outpost dev` starts its agent in between.
func (s *Server) Wait(ctx context.Context) error {
	var serveErr error
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case serveErr = <-s.serveErr:
			done = true
		case serveErr = <-s.fatal:
			done = true
		case why := <-s.restartCh:
			// Exiting cleanly: systemd (Restart=always) starts the
			// binary DIR/current names now.
			s.log.Info("exiting to be restarted", "why", why)
			done = true
		case <-s.cfg.Reload:
			// Logged by ReloadSchedulers; a bad file keeps the last good
			// policy and the server goes on.
			_ = s.ReloadSchedulers()
		}
	}
	return errors.Join(serveErr, s.Close())
}

// restart ends Wait, so the process exits and its supervisor starts it
// again (on a newly swapped binary, or the good one after a roll back).
func (s *Server) restart(why string) {
	select {
	case s.restartCh <- why:
	default:
	}
}

// Node is the server's raft member.
func (s *Server) Node() *raftstore.Node { return s.node }

// Store is the server's state machine, for in-process readers (the
// scheduler and controllers on the leader, tests).
func (s *Server) Store() *store.Store { return s.store }

// URL is the API's URL as advertised, with the real port when APIAddr
// asked for port 0.
func (s *Server) URL() string { return s.url }

// AdminConfig is the admin client config the server wrote.
func (s *Server) AdminConfig() client.Config { return s.adminConfig() }

// CA is the cluster CA (derived from the cluster secret).
func (s *Server) CA() *pki.CA { return s.ca }

// WaitReady blocks until the server would answer /readyz with 200: raft
// has a leader, this server has caught up with it, and the cluster's
// bootstrap objects exist.
func (s *Server) WaitReady(ctx context.Context) error {
	backoff := 10 * time.Millisecond
	for {
		reason := s.notReady(ctx)
		if reason == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server %s not ready: %s: %w", s.cfg.ID, reason, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}
