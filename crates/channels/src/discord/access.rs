//! Who may talk to the bot on Discord and where their message goes, with OpenClaw's settings
//! (`channels.discord.dmPolicy`/`allowFrom`, `groupPolicy`, `guilds.<id>.requireMention`,
//! `guilds.<id>.users`, `guilds.<id>.channels.<id>.allow`/`requireMention`): a direct
//! message from an allowed person goes to the agent's main session (OpenClaw's default
//! `dmScope: main`), its replies to that person (`user:<id>`); a guild channel's message to
//! `agent:<id>:discord:channel:<channelId>` (a thread is a channel: its own id) when the
//! guild and channel are allowed and, where required, the bot was @mentioned. Anything else
//! is ignored with the reason, for the channel to count.

use std::collections::BTreeMap;

use switchboard_types::config::channels::{DiscordConfig, DmPolicy, GroupPolicy, ids_as_text};

use super::events::Message;

/// One guild's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuildRule {
    pub require_mention: Option<bool>,
    /// Members heard (empty: all).
    pub users: Vec<String>,
    /// Channel id (or `*`) → its rule; when any is listed only those are served.
    pub channels: BTreeMap<String, ChannelRule>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChannelRule {
    /// `false` (from `allow` or `enabled`) leaves the channel out.
    pub allowed: bool,
    pub require_mention: Option<bool>,
}

/// The Discord channel's access settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    pub dm_policy: DmPolicy,
    /// People allowed to write directly: user ids, usernames, or `*`.
    pub allow_from: Vec<String>,
    pub group_policy: GroupPolicy,
    pub guilds: BTreeMap<String, GuildRule>,
}

/// Why a message was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// No text (an attachment alone, or MESSAGE_CONTENT not granted).
    NoText,
    /// Sent by a bot (this one included) or a webhook.
    FromBot,
    SenderNotAllowed,
    DirectsDisabled,
    GuildNotAllowed,
    ChannelNotAllowed,
    GuildsDisabled,
    NotMentioned,
}

impl Ignored {
    pub fn as_str(self) -> &'static str {
        match self {
            Ignored::NoText => "no text",
            Ignored::FromBot => "from a bot",
            Ignored::SenderNotAllowed => "sender not allowed",
            Ignored::DirectsDisabled => "direct messages disabled",
            Ignored::GuildNotAllowed => "guild not allowed",
            Ignored::ChannelNotAllowed => "channel not allowed",
            Ignored::GuildsDisabled => "guild channels disabled",
            Ignored::NotMentioned => "bot not mentioned",
        }
    }
}

/// Where an admitted message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admit {
    /// A direct message: the agent's main session; replies to `user:<id>`.
    Direct,
    /// A direct message from a sender not in `allowFrom` under `dmPolicy: "pairing"`: the
    /// inbox asks whether the owner approved them (else tells them a code).
    Unpaired,
    /// A guild channel (or thread): its own session.
    Guild {
        channel_id: String,
    },
    Ignored(Ignored),
}

impl Access {
    /// The settings `channels.discord` gives.
    pub fn from_config(c: &DiscordConfig) -> Access {
        Access {
            dm_policy: c.dm_policy(),
            allow_from: c.allow_from_text(),
            group_policy: c.group_policy,
            guilds: c
                .guilds
                .iter()
                .map(|(id, g)| {
                    let channels = g
                        .channels
                        .iter()
                        .map(|(ch, r)| {
                            let allowed = r.allow != Some(false) && r.enabled != Some(false);
                            let rule = ChannelRule {
                                allowed,
                                require_mention: r.require_mention,
                            };
                            (ch.clone(), rule)
                        })
                        .collect();
                    let rule = GuildRule {
                        require_mention: g.require_mention,
                        users: ids_as_text(&g.users),
                        channels,
                    };
                    (id.clone(), rule)
                })
                .collect(),
        }
    }

    /// Decide about `msg`, received by the bot whose user id is `bot_id`.
    pub fn admit(&self, msg: &Message, bot_id: &str) -> Admit {
        self.admit_in(msg, bot_id, None)
    }

    /// As `admit`, for a message whose channel is a thread of `parent` (its rules apply when
    /// the thread has none of its own).
    pub fn admit_in(&self, msg: &Message, bot_id: &str, parent: Option<&str>) -> Admit {
        if msg.author.bot || msg.webhook_id.is_some() || msg.author.id == bot_id {
            return Admit::Ignored(Ignored::FromBot);
        }
        if msg.content.trim().is_empty() {
            return Admit::Ignored(Ignored::NoText);
        }
        let Some(guild) = &msg.guild_id else {
            return match self.dm_policy {
                DmPolicy::Disabled => Admit::Ignored(Ignored::DirectsDisabled),
                DmPolicy::Open => Admit::Direct,
                DmPolicy::Allowlist | DmPolicy::Pairing if allows(&self.allow_from, msg) => {
                    Admit::Direct
                }
                DmPolicy::Pairing => Admit::Unpaired,
                DmPolicy::Allowlist => Admit::Ignored(Ignored::SenderNotAllowed),
            };
        };
        match self.guild_channel(guild, msg, bot_id, parent) {
            Ok(()) => Admit::Guild {
                channel_id: msg.channel_id.clone(),
            },
            Err(why) => Admit::Ignored(why),
        }
    }

    /// Whether a guild channel's message is taken.
    fn guild_channel(
        &self,
        guild: &str,
        msg: &Message,
        bot_id: &str,
        parent: Option<&str>,
    ) -> Result<(), Ignored> {
        let rule = self.guilds.get(guild).or_else(|| self.guilds.get("*"));
        match (self.group_policy, rule) {
            (GroupPolicy::Disabled, _) => return Err(Ignored::GuildsDisabled),
            (GroupPolicy::Allowlist, None) => return Err(Ignored::GuildNotAllowed),
            _ => {}
        }
        let channel = rule.and_then(|r| {
            r.channels
                .get(&msg.channel_id)
                .or_else(|| parent.and_then(|p| r.channels.get(p)))
                .or_else(|| r.channels.get("*"))
        });
        let listed = rule.is_some_and(|r| !r.channels.is_empty());
        match channel {
            Some(c) if !c.allowed => return Err(Ignored::ChannelNotAllowed),
            None if listed && self.group_policy == GroupPolicy::Allowlist => {
                return Err(Ignored::ChannelNotAllowed);
            }
            _ => {}
        }
        if let Some(r) = rule.filter(|r| !r.users.is_empty())
            && !allows(&r.users, msg)
        {
            return Err(Ignored::SenderNotAllowed);
        }
        let require_mention = channel
            .and_then(|c| c.require_mention)
            .or_else(|| rule.and_then(|r| r.require_mention))
            .unwrap_or(true);
        if require_mention && !msg.mentions(bot_id) {
            return Err(Ignored::NotMentioned);
        }
        Ok(())
    }
}

/// Whether `list` names the author (by id, `user:<id>`, `<@id>`, username with or without
/// `@`, in any case; or `*`).
fn allows(list: &[String], msg: &Message) -> bool {
    let name = msg.author.username.to_lowercase();
    list.iter().any(|entry| {
        let e = entry.trim();
        let id = e
            .strip_prefix("user:")
            .or_else(|| e.strip_prefix("<@").and_then(|r| r.strip_suffix('>')))
            .map(|r| r.trim_start_matches('!'))
            .unwrap_or(e);
        e == "*"
            || id == msg.author.id
            || (!name.is_empty() && e.trim_start_matches('@').to_lowercase() == name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discord::events::User;

    const BOT: &str = "900";

    fn msg(guild: Option<&str>, channel: &str, author: &str, content: &str) -> Message {
        Message {
            id: "1".into(),
            channel_id: channel.into(),
            guild_id: guild.map(str::to_string),
            author: User {
                id: author.into(),
                username: format!("user{author}"),
                ..User::default()
            },
            content: content.into(),
            ..Message::default()
        }
    }

    fn access(config: &str) -> Access {
        let c: DiscordConfig = serde_json::from_str(config).expect("config");
        Access::from_config(&c)
    }

    #[test]
    fn direct_messages_follow_the_dm_policy_and_allow_from_in_either_place() {
        let a = access(r#"{"dmPolicy": "allowlist", "allowFrom": [42, "@User43"]}"#);
        assert_eq!(a.admit(&msg(None, "5", "42", "hi"), BOT), Admit::Direct);
        assert_eq!(a.admit(&msg(None, "5", "43", "hi"), BOT), Admit::Direct);
        assert_eq!(
            a.admit(&msg(None, "5", "66", "hi"), BOT),
            Admit::Ignored(Ignored::SenderNotAllowed)
        );
        let old = access(r#"{"dm": {"policy": "allowlist", "allowFrom": ["user:66"]}}"#);
        assert_eq!(old.admit(&msg(None, "5", "66", "hi"), BOT), Admit::Direct);
        let off = access(r#"{"dm": {"enabled": false}, "dmPolicy": "open"}"#);
        assert_eq!(
            off.admit(&msg(None, "5", "66", "hi"), BOT),
            Admit::Ignored(Ignored::DirectsDisabled)
        );
    }

    #[test]
    fn guild_channels_need_an_allowed_guild_and_channel_and_a_mention() {
        let a = access(
            r#"{"guilds": {"10": {"channels": {"100": {"allow": true, "requireMention": false},
                                                "101": {"allow": false}}},
                           "11": {}}}"#,
        );
        let guild = |g: &str, ch: &str, text: &str| a.admit(&msg(Some(g), ch, "42", text), BOT);
        let to = |ch: &str| Admit::Guild {
            channel_id: ch.into(),
        };
        assert_eq!(guild("10", "100", "hello"), to("100"));
        assert_eq!(
            guild("10", "101", "<@900> hello"),
            Admit::Ignored(Ignored::ChannelNotAllowed)
        );
        assert_eq!(
            guild("10", "102", "<@900> hello"),
            Admit::Ignored(Ignored::ChannelNotAllowed)
        );
        assert_eq!(
            guild("11", "110", "hello"),
            Admit::Ignored(Ignored::NotMentioned)
        );
        assert_eq!(guild("11", "110", "<@!900> hello"), to("110"));
        assert_eq!(
            guild("12", "120", "<@900> hello"),
            Admit::Ignored(Ignored::GuildNotAllowed)
        );
        let open = access(r#"{"groupPolicy": "open"}"#);
        assert_eq!(
            open.admit(&msg(Some("12"), "120", "42", "<@900> hi"), BOT),
            to("120")
        );
        let off = access(r#"{"groupPolicy": "disabled", "guilds": {"*": {}}}"#);
        assert_eq!(
            off.admit(&msg(Some("12"), "120", "42", "<@900> hi"), BOT),
            Admit::Ignored(Ignored::GuildsDisabled)
        );
    }

    #[test]
    fn bots_webhooks_and_empty_messages_are_ignored() {
        let a = access(r#"{"dmPolicy": "open"}"#);
        let mut m = msg(None, "5", BOT, "my own reply");
        assert_eq!(a.admit(&m, BOT), Admit::Ignored(Ignored::FromBot));
        m.author.id = "77".into();
        m.author.bot = true;
        assert_eq!(a.admit(&m, BOT), Admit::Ignored(Ignored::FromBot));
        m.author.bot = false;
        m.webhook_id = Some("1".into());
        assert_eq!(a.admit(&m, BOT), Admit::Ignored(Ignored::FromBot));
        assert_eq!(
            a.admit(&msg(None, "5", "42", "  "), BOT),
            Admit::Ignored(Ignored::NoText)
        );
    }

    #[test]
    fn guild_users_limit_who_is_heard() {
        let a = access(r#"{"guilds": {"10": {"requireMention": false, "users": ["42"]}}}"#);
        assert!(matches!(
            a.admit(&msg(Some("10"), "100", "42", "hi"), BOT),
            Admit::Guild { .. }
        ));
        assert_eq!(
            a.admit(&msg(Some("10"), "100", "43", "hi"), BOT),
            Admit::Ignored(Ignored::SenderNotAllowed)
        );
    }
}
