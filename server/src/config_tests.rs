//! The configuration's loading, validation and redaction, on files and environments made by figment's Jail.

use super::*;

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn reads_toml_then_environment() {
    figment::Jail::expect_with(|jail| {
        jail.create_file(
            "slurmlens.toml",
            "clusters = [\"lab\"]\n[slurmdbd]\nurl = \"mysql://file\"\nmax_connections = 4\nacquire_timeout_ms = 10\n",
        )?;
        jail.set_env("SLURMLENS_SLURMDBD_URL", "mysql://env");
        jail.set_env("SLURMLENS_CLUSTERS", "lab,sakura");
        let config = Config::load(Some(Path::new("slurmlens.toml"))).map_err(|e| e.to_string())?;
        assert_eq!(config.slurmdbd.url, "mysql://env");
        assert_eq!(config.slurmdbd.max_connections, 4);
        assert_eq!(config.clusters.iter().map(ClusterName::as_str).collect::<Vec<_>>(), ["lab", "sakura"]);
        Ok(())
    });
}

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn the_example_configuration_loads_as_documented() {
    figment::Jail::expect_with(|jail| {
        jail.create_file("example.toml", include_str!("../../slurmlens.example.toml"))?;
        let config = Config::load(Some(Path::new("example.toml"))).map_err(|e| e.to_string())?;
        assert_eq!(config.metrics.faults.loss_threshold, 0.01);
        assert_eq!(config.metrics.bursts.line_rate_bytes_per_s, 5e10);
        assert_eq!(config.metrics.gpu_metrics, crate::domain::series::SeriesCatalog::default().gpu_metrics);
        assert_eq!(config.access.staff_groups, ["hpc-staff"]);
        assert!(config.access.trusted_proxies.iter().any(|net| net.contains([127, 0, 0, 1].into())));
        assert_eq!(config.access.tokens.per_minute, 600);
        assert_eq!(config.slurmdbd.statement_timeout_s.seconds(), 10.0);
        assert_eq!(
            (config.limits.window_days.get(), config.limits.heavy_per_identity.get(), config.limits.heavy_total.get()),
            (31, 4, 32)
        );
        assert_eq!((config.http.header_read_timeout_ms.get(), config.http.max_connections.get()), (10_000, 4096));
        assert_eq!(config.victoriametrics.as_ref().map(|vm| vm.readings_max_age_s), Some(3600));
        assert_eq!(
            (config.report.backfill_days, config.report.backfill_concurrency, config.report.backfill_pause_ms),
            (31, 2, 100)
        );
        let logs = config.victorialogs.as_ref().expect("[victorialogs]");
        assert_eq!((logs.node_field.as_str(), logs.max_lines), ("host", 1000));
        let profiles = config.pyroscope.as_ref().expect("[pyroscope]");
        assert_eq!(profiles.profile_type.id(), "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
        assert_eq!((profiles.host_label.as_str(), profiles.cgroup_label.as_str()), ("hostname", "cgroup_path"));
        Ok(())
    });
}

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn trusted_proxies_are_addresses_or_networks_and_nothing_else() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("SLURMLENS_ACCESS__TRUSTED_PROXIES", r#"["10.1.0.0/16", "192.0.2.7"]"#);
        let config = Config::load(None).map_err(|e| e.to_string())?;
        let nets = &config.access.trusted_proxies;
        assert!(nets.iter().any(|net| net.contains([10, 1, 200, 3].into())));
        assert!(nets.iter().any(|net| net.contains([192, 0, 2, 7].into())));
        assert!(!nets.iter().any(|net| net.contains([127, 0, 0, 1].into())), "the list replaces loopback");
        jail.set_env("SLURMLENS_ACCESS__TRUSTED_PROXIES", "10.2.0.0/16, 192.0.2.8");
        let nets = Config::load(None).map_err(|e| e.to_string())?.access.trusted_proxies;
        assert!(nets.iter().any(|net| net.contains([192, 0, 2, 8].into())), "comma-separated, as env carries it");
        jail.set_env("SLURMLENS_ACCESS__TRUSTED_PROXIES", r#"["proxy.example.org"]"#);
        assert!(Config::load(None).is_err(), "a host name is refused, not resolved");
        Ok(())
    });
}

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn the_listener_is_a_tcp_address_or_an_absolute_socket_path() {
    figment::Jail::expect_with(|jail| {
        let listen = |jail: &mut figment::Jail, text: &str| {
            jail.set_env("SLURMLENS_LISTEN", text);
            Config::load(None).map(|config| config.listen).map_err(|error| error.to_string())
        };
        assert_eq!(listen(jail, "0.0.0.0:8080")?, ListenAddress::Tcp(([0, 0, 0, 0], 8080).into()));
        assert_eq!(
            listen(jail, "unix:/run/slurmlens/http.sock")?,
            ListenAddress::Unix("/run/slurmlens/http.sock".into())
        );
        assert_eq!(ListenAddress::Unix("/run/x.sock".into()).to_string(), "unix:/run/x.sock");
        for refused in ["unix:run/http.sock", "localhost", "8080", ""] {
            let error = listen(jail, refused).expect_err(refused);
            assert!(error.to_lowercase().contains("listen"), "{refused}: {error}");
        }
        // On the socket the proxy needs no address: its file's mode decides who may connect.
        jail.set_env("SLURMLENS_ACCESS__USER_HEADER", "X-Remote-User");
        assert!(listen(jail, "127.0.0.1:8080").is_err(), "over TCP a user header needs trusted_proxies");
        listen(jail, "unix:/run/slurmlens/http.sock")?;
        Ok(())
    });
}

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn nothing_is_trusted_by_default_and_contradictions_fail_at_load() {
    figment::Jail::expect_with(|jail| {
        assert!(Config::load(None).map_err(|e| e.to_string())?.access.trusted_proxies.is_empty());
        jail.set_env("SLURMLENS_ACCESS__USER_HEADER", "X-Remote-User");
        let refused = Config::load(None).expect_err("a user header that no peer may send").to_string();
        assert!(refused.contains("trusted_proxies"), "{refused}");
        jail.set_env("SLURMLENS_ACCESS__TRUSTED_PROXIES", "127.0.0.1");
        Config::load(None).map_err(|e| e.to_string())?;
        jail.set_env("SLURMLENS_ACCESS__PROXY_SECRET_HEADER", "X-Proxy-Secret");
        assert!(Config::load(None).is_err(), "a secret header without its secret");
        jail.set_env("SLURMLENS_ACCESS__PROXY_SECRET", "short");
        assert!(Config::load(None).is_err(), "a guessable secret");
        jail.set_env("SLURMLENS_ACCESS__PROXY_SECRET", "a-long-enough-shared-secret");
        Config::load(None).map_err(|e| e.to_string())?;
        jail.set_env("SLURMLENS_ACCESS__TOKENS__MAX_DAYS", "4294967295");
        assert!(Config::load(None).is_err(), "max_days is bounded");
        Ok(())
    });
}

#[test]
fn urls_lose_their_passwords_when_shown() {
    assert_eq!(redact_url("mysql://reader:readerpw@db:3306/slurm_acct_db"), "mysql://reader:***@db:3306/slurm_acct_db");
    assert_eq!(redact_url("http://user:p@ss@vm:8428/x?y=@"), "http://user:***@vm:8428/x?y=@");
    assert_eq!(redact_url("http://vm:8428"), "http://vm:8428");
    let config = Config {
        database: Some(DatabaseConfig { url: "mysql://slurmlens:s3cret@db/slurmlens".into() }),
        ..Config::default()
    };
    let shown = format!("{:#?}", config.redacted());
    assert!(!shown.contains("readerpw") && !shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("mysql://reader:***@"), "{shown}");
}

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn refuses_unsafe_cluster_names_and_unknown_keys() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("SLURMLENS_CLUSTERS", "lab;drop");
        assert!(Config::load(None).is_err());
        jail.set_env("SLURMLENS_CLUSTERS", "lab");
        jail.create_file("bad.toml", "listen_addr = \"x\"\n")?;
        assert!(Config::load(Some(Path::new("bad.toml"))).is_err());
        Ok(())
    });
}

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn log_fields_labels_and_profile_types_are_validated_at_load() {
    figment::Jail::expect_with(|jail| {
        jail.set_env("SLURMLENS_VICTORIALOGS__URL", "http://vlogs:9428");
        jail.set_env("SLURMLENS_PYROSCOPE__URL", "http://pyroscope:4040");
        let config = Config::load(None).map_err(|e| e.to_string())?;
        assert_eq!(config.victorialogs.as_ref().map(|logs| logs.node_field.as_str()), Some("host"));
        assert_eq!(
            config.pyroscope.as_ref().map(|p| p.profile_type.id()),
            Some("process_cpu:cpu:nanoseconds:cpu:nanoseconds")
        );
        jail.set_env("SLURMLENS_VICTORIALOGS__NODE_FIELD", "host:in(x)");
        assert!(Config::load(None).is_err(), "a node field that is not a field name");
        jail.set_env("SLURMLENS_VICTORIALOGS__NODE_FIELD", "host.name");
        jail.set_env("SLURMLENS_PYROSCOPE__PROFILE_TYPE", "goroutine");
        assert!(Config::load(None).is_err(), "a profile type outside the allowlist");
        jail.set_env("SLURMLENS_PYROSCOPE__PROFILE_TYPE", "cpu");
        jail.set_env("SLURMLENS_PYROSCOPE__CGROUP_LABEL", "cgroup path");
        assert!(Config::load(None).is_err(), "a label that is not a label name");
        Ok(())
    });
}

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn overload_limits_have_defaults_and_refuse_what_would_lift_them() {
    figment::Jail::expect_with(|jail| {
        let config = Config::load(None).map_err(|e| e.to_string())?;
        assert_eq!(config.slurmdbd.statement_timeout_s.seconds(), 10.0);
        assert_eq!(config.limits.window_days.get(), 31);
        assert_eq!(config.http.header_read_timeout_ms.get(), 10_000);
        jail.set_env("SLURMLENS_SLURMDBD__STATEMENT_TIMEOUT_S", "0.25");
        let config = Config::load(None).map_err(|e| e.to_string())?;
        assert_eq!(config.slurmdbd.statement_timeout_s.seconds(), 0.25);
        for lifted in ["0", "-1", "86400"] {
            jail.set_env("SLURMLENS_SLURMDBD__STATEMENT_TIMEOUT_S", lifted);
            assert!(Config::load(None).is_err(), "statement_timeout_s = {lifted}");
        }
        jail.set_env("SLURMLENS_SLURMDBD__STATEMENT_TIMEOUT_S", "10");
        for key in ["LIMITS__WINDOW_DAYS", "LIMITS__HEAVY_PER_IDENTITY", "HTTP__MAX_CONNECTIONS"] {
            jail.set_env(format!("SLURMLENS_{key}"), "0");
            assert!(Config::load(None).is_err(), "{key} = 0");
            jail.set_env(format!("SLURMLENS_{key}"), "3");
        }
        Ok(())
    });
}

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn reads_ingest_secrets_from_file_and_environment_and_never_prints_them() {
    figment::Jail::expect_with(|jail| {
        jail.create_file("s.toml", "[ingest.secrets]\nlab = \"from-the-file-0123456789\"\n")?;
        jail.set_env("SLURMLENS_INGEST__SECRETS__SAKURA", "from-the-environment-0123");
        let config = Config::load(Some(Path::new("s.toml"))).map_err(|e| e.to_string())?;
        let secret = |name: &str| config.ingest.secrets.get(name).map(|secret| secret.0.clone());
        assert_eq!(secret("lab").as_deref(), Some("from-the-file-0123456789"));
        assert_eq!(secret("sakura").as_deref(), Some("from-the-environment-0123"));
        assert!(!format!("{config:?}").contains("from-the"));
        jail.create_file("bad.toml", "[ingest]\nsecret = \"x\"\n")?;
        assert!(Config::load(Some(Path::new("bad.toml"))).is_err());
        Ok(())
    });
}

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn telemetry_and_log_format_are_read_and_a_short_scrape_token_refused() {
    figment::Jail::expect_with(|jail| {
        let config = Config::load(None).map_err(|e| e.to_string())?;
        assert!(config.telemetry.token.is_none() && config.telemetry.listen.is_none());
        assert_eq!(config.log.format, crate::telemetry::LogFormat::Text);
        jail.create_file(
            "slurmlens.toml",
            "[telemetry]\ntoken = \"scrape-token-0123456789\"\nlisten = \"127.0.0.1:9465\"\n[log]\nformat = \"json\"\n",
        )?;
        let config = Config::load(Some(Path::new("slurmlens.toml"))).map_err(|e| e.to_string())?;
        assert_eq!(config.telemetry.token, Some(IngestSecret("scrape-token-0123456789".into())));
        assert_eq!(config.telemetry.listen, Some("127.0.0.1:9465".parse().expect("an address")));
        assert_eq!(config.log.format, crate::telemetry::LogFormat::Json);
        assert!(!format!("{:?}", config.redacted()).contains("scrape-token"), "the token is never shown");
        jail.create_file("short.toml", "[telemetry]\ntoken = \"short\"\n")?;
        let error = Config::load(Some(Path::new("short.toml"))).expect_err("a short token is refused").to_string();
        assert!(error.contains("[telemetry] token"), "{error}");
        jail.create_file("bad.toml", "[log]\nformat = \"xml\"\n")?;
        assert!(Config::load(Some(Path::new("bad.toml"))).is_err(), "an unknown format is refused");
        jail.set_env("SLURMLENS_LOG__FORMAT", "text");
        let config = Config::load(Some(Path::new("slurmlens.toml"))).map_err(|e| e.to_string())?;
        assert_eq!(config.log.format, crate::telemetry::LogFormat::Text, "the environment overrides the file");
        Ok(())
    });
}

#[test]
#[expect(clippy::result_large_err, reason = "figment's Jail fixes the closure's error type")]
fn links_are_plain_urls_without_credentials_and_grafana_names_what_to_open() {
    figment::Jail::expect_with(|jail| {
        let defaults = Config::load(None).map_err(|e| e.to_string())?.links;
        assert_eq!((defaults.grafana_url, defaults.vmui_url), (None, None), "vmui beside VictoriaMetrics by default");
        assert_eq!((defaults.grafana_datasource_type.as_str(), defaults.grafana_org_id), ("prometheus", 1));
        jail.create_file(
            "slurmlens.toml",
            "clusters = [\"lab\"]\n[links]\ngrafana_url = \"https://grafana.example.org\"\n\
             grafana_datasource_uid = \"vm\"\ngrafana_dashboard_uid = \"slurm-job\"\nvmui_url = \"https://vm.example.org/vmui/\"\n",
        )?;
        let links = Config::load(Some(Path::new("slurmlens.toml"))).map_err(|e| e.to_string())?.links;
        assert_eq!(links.grafana_dashboard_uid.as_deref(), Some("slurm-job"));
        jail.set_env("SLURMLENS_LINKS__VMUI_URL", "https://user:pw@vm.example.org/vmui/");
        let refused = Config::load(Some(Path::new("slurmlens.toml"))).expect_err("credentials in a link").to_string();
        assert!(refused.contains("credentials"), "{refused}");
        jail.set_env("SLURMLENS_LINKS__VMUI_URL", "javascript:alert(1)");
        assert!(Config::load(Some(Path::new("slurmlens.toml"))).is_err(), "only http(s) links");
        jail.set_env("SLURMLENS_LINKS__VMUI_URL", "");
        Config::load(Some(Path::new("slurmlens.toml"))).map_err(|e| e.to_string())?;
        jail.create_file(
            "bare.toml",
            "clusters = [\"lab\"]\n[links]\ngrafana_url = \"https://grafana.example.org\"\n",
        )?;
        let refused = Config::load(Some(Path::new("bare.toml"))).expect_err("Grafana with nothing to open").to_string();
        assert!(refused.contains("grafana_datasource_uid"), "{refused}");
        Ok(())
    });
}
