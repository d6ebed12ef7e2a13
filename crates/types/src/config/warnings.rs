//! Values that load but are not used as written (clamped or replaced by a default): each is
//! reported with the value used instead, by `config check` and at start-up.

use super::model::Config;

/// A value the engine will not use as written.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigWarning {
    /// Dotted key path, e.g. `session.agentToAgent.maxPingPongTurns`.
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Every value of `config` that is used other than as written.
pub fn warnings(config: &Config) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    let a2a = &config.session.agent_to_agent;
    let written = a2a.max_ping_pong_turns;
    let used = a2a.max_ping_pong_turns();
    if !written.is_finite() || written != f64::from(used) {
        out.push(ConfigWarning {
            path: "session.agentToAgent.maxPingPongTurns".into(),
            message: format!(
                "{written} is not a whole number from 0 to 5 (the reply-back turns OpenClaw \
                 allows); {used} will be used"
            ),
        });
    }
    out.extend(channel_warnings(config));
    out
}

/// OpenClaw's channel settings this build keeps but does not use.
fn channel_warnings(config: &Config) -> Vec<ConfigWarning> {
    let mut out: Vec<ConfigWarning> = config
        .channels
        .other
        .keys()
        .map(|name| ConfigWarning {
            path: format!("channels.{name}"),
            message: "this channel is OpenClaw's and not built here yet: kept, not used".into(),
        })
        .collect();
    if let Some(discord) = &config.channels.discord {
        out.extend(discord_warnings(discord));
    }
    if let Some(telegram) = &config.channels.telegram {
        out.extend(telegram.other.keys().map(|key| ConfigWarning {
            path: format!("channels.telegram.{key}"),
            message: "OpenClaw's setting, not used here: kept as written".into(),
        }));
        if telegram.enabled
            && telegram.dm_policy != super::channels::DmPolicy::Open
            && telegram.dm_policy != super::channels::DmPolicy::Disabled
            && telegram.allow_from.is_empty()
        {
            out.push(ConfigWarning {
                path: "channels.telegram.allowFrom".into(),
                message: "empty: nobody may write to the bot directly (dmPolicy admits only \
                          allowFrom; pairing codes are not built here yet)"
                    .into(),
            });
        }
    }
    out
}

/// Discord's: OpenClaw's keys kept but unused, and a direct-message policy nobody passes.
fn discord_warnings(discord: &super::channels::DiscordConfig) -> Vec<ConfigWarning> {
    let unused = |prefix: String, keys: &std::collections::BTreeMap<String, serde_json::Value>| {
        keys.keys()
            .map(|key| ConfigWarning {
                path: format!("{prefix}.{key}"),
                message: "OpenClaw's setting, not used here: kept as written".into(),
            })
            .collect::<Vec<_>>()
    };
    let mut out = unused("channels.discord".into(), &discord.other);
    if let Some(dm) = &discord.dm {
        out.extend(unused("channels.discord.dm".into(), &dm.other));
    }
    for (id, guild) in &discord.guilds {
        out.extend(unused(
            format!("channels.discord.guilds.{id}"),
            &guild.other,
        ));
        for (channel, rule) in &guild.channels {
            out.extend(unused(
                format!("channels.discord.guilds.{id}.channels.{channel}"),
                &rule.other,
            ));
        }
    }
    let policy = discord.dm_policy();
    if discord.enabled
        && matches!(
            policy,
            super::channels::DmPolicy::Allowlist | super::channels::DmPolicy::Pairing
        )
        && discord.allow_from_text().is_empty()
    {
        out.push(ConfigWarning {
            path: "channels.discord.allowFrom".into(),
            message: "empty: nobody may write to the bot directly (dmPolicy admits only \
                      allowFrom; pairing codes are not built here yet)"
                .into(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_turns(v: f64) -> Vec<ConfigWarning> {
        let mut c = Config::default();
        c.session.agent_to_agent.max_ping_pong_turns = v;
        warnings(&c)
    }

    #[test]
    fn turns_in_range_are_not_reported() {
        for v in [0.0, 3.0, 5.0] {
            assert_eq!(with_turns(v), vec![], "{v}");
        }
        assert_eq!(warnings(&Config::default()), vec![]);
    }

    #[test]
    fn turns_outside_the_range_say_what_is_used() {
        for (v, used) in [
            (9.0, "5"),
            (-1.0, "0"),
            (2.5, "2"),
            (f64::INFINITY, "5"),
            (f64::NAN, "5"),
        ] {
            let w = with_turns(v);
            assert_eq!(w.len(), 1, "{v}");
            assert_eq!(w[0].path, "session.agentToAgent.maxPingPongTurns");
            assert!(
                w[0].message.ends_with(&format!("; {used} will be used")),
                "{v}: {}",
                w[0].message
            );
        }
    }
}
