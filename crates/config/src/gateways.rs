//! The `gateways` section and `localSource`: the named sources the console and the read
//! commands attach to beside the local state folder. Each entry is checked field by field
//! (name, url, tokenFile | tokenEnv) so a bad one is reported where it was written, and
//! relative paths are made absolute from the config file's folder.

use std::collections::HashMap;
use std::path::Path;

use super::model::Config;
use super::source::Seg;
use switchboard_types::api::source::check_name;

fn k(s: &str) -> Seg {
    Seg::Key(s.to_string())
}

/// The place two entries must not share: the address without a trailing slash, in lower
/// case (as `switchboard_sources` compares them).
fn place(url: &str) -> String {
    url.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// Why `url` cannot be a gateway's address, if it cannot.
fn url_problem(url: &str) -> Option<String> {
    let lower = url.trim().to_ascii_lowercase();
    let rest = lower
        .strip_prefix("ws://")
        .or_else(|| lower.strip_prefix("wss://"));
    match rest {
        None => Some(format!(
            "expected a ws:// or wss:// address such as \"ws://127.0.0.1:18789\", got {url:?}"
        )),
        Some(rest) if rest.split('/').next().is_none_or(str::is_empty) => {
            Some(format!("{url:?} names no host"))
        }
        Some(_) => None,
    }
}

/// What is wrong with `gateways` and `localSource`, as (key path, message); `at` maps a
/// path in the parsed config to the one written.
pub(crate) fn problems(
    config: &Config,
    at: &dyn Fn(&[Seg]) -> Vec<Seg>,
) -> Vec<(Vec<Seg>, String)> {
    let mut out = Vec::new();
    let local = config.local_source.as_str();
    if let Err(e) = check_name(local) {
        out.push((at(&[k("localSource")]), e.to_string()));
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut places: HashMap<String, usize> = HashMap::new();
    for (i, g) in config.gateways.iter().enumerate() {
        let field = |name: &str| at(&[k("gateways"), Seg::Index(i), k(name)]);
        if g.name.is_empty() {
            out.push((
                field("name"),
                "missing name: every gateway needs a \"name\" such as \"team\" (its sessions \
                 are then team/<key>)"
                    .to_string(),
            ));
        } else if let Err(e) = check_name(&g.name) {
            out.push((field("name"), e.to_string()));
        } else if g.name == local {
            out.push((
                field("name"),
                format!(
                    "\"{local}\" is the local state folder's name (localSource): pick another \
                     name, or rename the local folder with localSource"
                ),
            ));
        } else if let Some(first) = names.insert(&g.name, i) {
            out.push((
                field("name"),
                format!(
                    "\"{}\" is also the name of gateways[{first}]: give each gateway its own name",
                    g.name
                ),
            ));
        }
        if g.url.trim().is_empty() {
            out.push((
                field("url"),
                "missing url: the gateway's address, such as \"ws://127.0.0.1:18789\" or \
                 \"wss://team.example.com:18789\""
                    .to_string(),
            ));
        } else if let Some(problem) = url_problem(&g.url) {
            out.push((field("url"), problem));
        } else if let Some(first) = places.insert(place(&g.url), i) {
            out.push((
                field("url"),
                format!(
                    "{:?} is also the address of gateways[{first}]: attach to a gateway once",
                    g.url
                ),
            ));
        }
        if g.token_file.is_some() && g.token_env.is_some() {
            out.push((
                field("tokenEnv"),
                "set tokenFile or tokenEnv, not both".to_string(),
            ));
        }
        if let Some(var) = &g.token_env
            && (var.is_empty() || var.contains(['=', '\0']))
        {
            out.push((
                field("tokenEnv"),
                format!("{var:?} is not an environment variable's name"),
            ));
        }
        for (name, path) in [("tokenFile", &g.token_file), ("tlsCa", &g.tls_ca)] {
            if path.as_ref().is_some_and(|p| p.as_os_str().is_empty()) {
                out.push((field(name), "must not be empty (a file's path)".to_string()));
            }
        }
        if g.tls_ca.is_some() && g.url.trim().to_ascii_lowercase().starts_with("ws://") {
            out.push((
                field("tlsCa"),
                "a CA certificate is for a wss:// address; this one is ws:// (no TLS)".to_string(),
            ));
        }
    }
    out
}

/// `tokenFile` and `tlsCa` given relative are the config file's neighbours, not the
/// current folder's.
pub(crate) fn resolve_paths(config: &mut Config, base: Option<&Path>) {
    let Some(base) = base else { return };
    for g in &mut config.gateways {
        for path in [&mut g.token_file, &mut g.tls_ca].into_iter().flatten() {
            if path.is_relative() && !path.as_os_str().is_empty() {
                *path = base.join(&*path);
            }
        }
    }
}

/// What only the environment can tell (`config check` reports it; a command attaching to
/// the gateway says it for that source alone): a token variable unset, a token file missing.
pub(crate) fn environment_problems(config: &Config) -> Vec<(Vec<Seg>, String)> {
    let mut out = Vec::new();
    for (i, g) in config.gateways.iter().enumerate() {
        let field = |name: &str| vec![k("gateways"), Seg::Index(i), k(name)];
        if let Some(var) = &g.token_env
            && std::env::var_os(var).is_none_or(|v| v.is_empty())
        {
            out.push((
                field("tokenEnv"),
                format!(
                    "the environment variable {var} is not set (or empty), so gateway \"{}\" has \
                     no token; it will refuse the connection until it is set",
                    g.name
                ),
            ));
        }
        if let Some(file) = &g.token_file
            && !file.is_file()
        {
            out.push((
                field("tokenFile"),
                format!(
                    "no token file at {} (gateway \"{}\" cannot be attached without it)",
                    file.display(),
                    g.name
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::{ConfigProblem, parse_str};

    fn problems(src: &str) -> Vec<ConfigProblem> {
        parse_str(src).expect_err("the config has problems")
    }

    fn said(problems: &[ConfigProblem], path: &str) -> String {
        problems
            .iter()
            .find(|p| p.path == path)
            .map(|p| p.message.clone())
            .unwrap_or_else(|| panic!("no problem at {path}: {problems:#?}"))
    }

    #[test]
    fn a_gateways_section_is_read_with_its_local_name() {
        let config = parse_str(
            r#"{
  localSource: "home",
  gateways: [
    { name: "team", url: "wss://team.example.com:18789", tokenFile: "/k/team.token",
      tlsCa: "/k/ca.pem" },
    { name: "oc", url: "ws://127.0.0.1:18790", tokenEnv: "OC_TOKEN" },
  ],
}"#,
        )
        .expect("valid");
        assert_eq!(config.local_source, "home");
        assert_eq!(config.gateways.len(), 2);
        let team = &config.gateways[0];
        assert_eq!(
            (team.name.as_str(), team.url.as_str()),
            ("team", "wss://team.example.com:18789")
        );
        assert_eq!(
            team.token_file.as_deref(),
            Some(std::path::Path::new("/k/team.token"))
        );
        assert_eq!(config.gateways[1].token_env.as_deref(), Some("OC_TOKEN"));
        // No section: no gateways, and the local folder is `local`.
        let plain = parse_str("{}").expect("valid");
        assert!(plain.gateways.is_empty());
        assert_eq!(plain.local_source, "local");
    }

    #[test]
    fn bad_entries_are_reported_by_field_and_line() {
        let p = problems(
            r#"{
  gateways: [
    { name: "Team", url: "ws://a:1" },
    { url: "http://b:1" },
    { name: "x", url: "ws://c:1", tokenFile: "t", tokenEnv: "T" },
    { name: "x", url: "WS://A:1/" },
    { name: "local", url: "ws://d:1" },
    { name: "y", url: "" },
    { name: "z", url: "ws://e:1", tokenEnv: "A=B", tlsCa: "ca.pem" },
    { name: "w", url: "ws://f:1", token: "abc" },
  ],
}"#,
        );
        let m = said(&p, "gateways[0].name");
        assert!(m.contains("\"Team\"") && m.contains("a-z"), "{m}");
        assert_eq!(
            p.iter()
                .find(|x| x.path == "gateways[0].name")
                .and_then(|x| x.line),
            Some(3)
        );
        assert!(said(&p, "gateways[1].name").contains("missing name"));
        assert!(said(&p, "gateways[1].url").contains("ws:// or wss://"));
        assert!(said(&p, "gateways[2].tokenEnv").contains("not both"));
        assert!(said(&p, "gateways[3].name").contains("gateways[2]"));
        assert!(said(&p, "gateways[3].url").contains("gateways[0]"));
        assert!(said(&p, "gateways[4].name").contains("localSource"));
        assert!(said(&p, "gateways[5].url").contains("missing url"));
        assert!(said(&p, "gateways[6].tokenEnv").contains("environment variable"));
        assert!(said(&p, "gateways[6].tlsCa").contains("wss://"));
        // An unknown field names the ones there are.
        let m = said(&p, "gateways[7].token");
        assert!(m.contains("tokenFile") && m.contains("tokenEnv"), "{m}");
    }

    #[test]
    fn a_bad_local_name_is_reported() {
        let p = problems(r#"{ localSource: "my home" }"#);
        assert!(said(&p, "localSource").contains("a-z"));
    }

    #[test]
    fn relative_paths_are_the_config_files_neighbours() {
        let dir = tempdir();
        let file = dir.join("config.json5");
        std::fs::write(
            &file,
            r#"{ gateways: [ { name: "t", url: "wss://t:1", tokenFile: "t.token", tlsCa: "/abs/ca.pem" } ] }"#,
        )
        .expect("write");
        let config = crate::load_file(&file).expect("valid");
        assert_eq!(
            config.gateways[0].token_file.as_deref(),
            Some(dir.join("t.token").as_path())
        );
        assert_eq!(
            config.gateways[0].tls_ca.as_deref(),
            Some(std::path::Path::new("/abs/ca.pem"))
        );
        // `config check` says the token file is missing, by field.
        let p = crate::check_file(&file).expect("read");
        assert!(said(&p, "gateways[0].tokenFile").contains("no token file"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempdir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "switchboard-config-gateways-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }
}
