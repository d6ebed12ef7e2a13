//! The closed sets of words the API and the events carry (statuses, kinds, reasons,
//! outcomes), each an enum whose variants name their wire spelling once: serde, `as_str`,
//! `FromStr` and `Display` all read the same table, so the wire cannot drift from the code
//! and a comparison against a misspelt literal cannot compile.

/// A word that is not one of an enum's wire spellings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {word:?} (expected one of: {expected})")]
pub struct UnknownWord {
    pub what: &'static str,
    pub word: String,
    pub expected: String,
}

/// One enum from a table of `Variant = "wire"` rows. A variant marked `#[serde(other)]`
/// also takes, on input from serde only, words this build does not know (a newer peer's),
/// so a page from a newer gateway still decodes. `FromStr` is exact: stored and typed
/// words are either known or an error naming the choices.
#[macro_export]
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $what:literal
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $wire:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $wire)] $variant ),+
        }

        impl $name {
            /// Every variant, in table order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire spelling.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $wire),+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::api::UnknownWord;

            fn from_str(s: &str) -> Result<$name, Self::Err> {
                match s {
                    $($wire => Ok($name::$variant),)+
                    _ => Err($crate::api::UnknownWord {
                        what: $what,
                        word: s.to_string(),
                        expected: [$($wire),+].join(", "),
                    }),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum! {
    /// How a run ended, or that it has not (`Running`: still going when a wait gave up, or
    /// a stored run with no end yet). A run's own outcome is never `Running`.
    "run status"
    pub enum RunStatus {
        Ok = "ok",
        Error = "error",
        Timeout = "timeout",
        Aborted = "aborted",
        Running = "running",
    }
}

wire_enum! {
    /// Where an exchange is. `Refused`: an entry for a send that never started one.
    "exchange status"
    pub enum ExchangeStatus {
        Running = "running",
        Done = "done",
        /// The engine stopped during it (closed on the next start-up).
        Interrupted = "interrupted",
        Refused = "refused",
    }
}

wire_enum! {
    /// What an exchanges-list entry is.
    "exchange kind"
    pub enum ExchangeKind {
        /// A `sessions_send` exchange.
        Send = "send",
        /// The target's send policy refused the send.
        Refused = "refused",
        /// The chain limit stopped the send before it started.
        Chain = "chain",
    }
}

wire_enum! {
    /// Why an exchange's reply-back loop, or the exchange, ended.
    "exchange end"
    pub enum ExchangeEnd {
        /// `maxPingPongTurns` reached.
        Cap = "cap",
        /// A speaker replied `REPLY_SKIP`.
        ReplySkip = "reply_skip",
        /// A speaker said nothing in a reply round.
        Empty = "empty",
        Error = "error",
        Timeout = "timeout",
        /// The owner aborted a round.
        Aborted = "aborted",
        /// Requester and target are the same session.
        SameSession = "self",
        /// `maxPingPongTurns` is 0.
        Disabled = "disabled",
        /// A send policy refused a round, or the send itself.
        Policy = "policy",
        /// The target did not answer the message.
        NoReply = "no_reply",
        /// The chain limit stopped the send.
        Chain = "chain",
        /// Recovery closed it after the engine stopped. The stored and wire word is this
        /// sentence (older databases hold it), unlike every other reason's one word.
        EngineStopped = "the engine stopped during the exchange",
        /// The gateway's record does not say why (an exchange reconstructed from an OpenClaw
        /// gateway's transcripts, where the loop stopped on a visible reply: the cap, or a
        /// step that never started; `detail` says what is known).
        NotRecorded = "not_recorded",
        /// A reason this build does not know (from a newer peer).
        #[serde(other)]
        Unknown = "unknown",
    }
}

wire_enum! {
    /// What an announce step did (an exchange's, or a sub-agent's completion announce).
    "announce outcome"
    pub enum AnnounceOutcome {
        Delivered = "delivered",
        /// Nothing to announce (`ANNOUNCE_SKIP`, or no text).
        Skipped = "skipped",
        /// The send policy refused the outbound message.
        Blocked = "blocked",
        /// Recorded, but the session has no channel route.
        NoRoute = "no_route",
        Failed = "failed",
        /// The exchange ended before its announce step.
        NotRun = "not_run",
        /// The announce run is under way.
        Running = "running",
        /// The announce ran, but the gateway's record does not say whether or where it was
        /// delivered (an OpenClaw gateway records the text, not the delivery).
        NotRecorded = "not_recorded",
        /// An announce run ended without its outcome being written (a crash), or a word
        /// this build does not know.
        #[serde(other)]
        Unknown = "unknown",
    }
}

impl AnnounceOutcome {
    /// The word front ends show: the engine's `delivered` means handed to the outbox, which
    /// holds the message until a channel sends it, so they say `queued`; the others as
    /// stored.
    pub fn shown(self) -> &'static str {
        match self {
            AnnounceOutcome::Delivered => "queued",
            other => other.as_str(),
        }
    }
}

/// An announce in one line, each fact once: `queued for slack group:incidents` (the detail
/// of a queued announce names its route), else the outcome's word (`word`: the caller's,
/// for the words it shows its own way), its route when known, and the detail.
pub fn announce_line(
    outcome: AnnounceOutcome,
    word: &str,
    route: Option<(&str, &str)>,
    detail: &str,
) -> String {
    if outcome == AnnounceOutcome::Delivered {
        // A detail that only restates where it went says nothing the route does not.
        let restates = detail.starts_with("queued for ") || detail.starts_with("delivered to ");
        let head = match route {
            Some((channel, to)) => format!("{word} for {channel} {to}"),
            None if restates => format!(
                "{word} for {}",
                detail.split_once(' ').map_or("", |(_, r)| r
                    .trim_start_matches("for ")
                    .trim_start_matches("to "))
            ),
            None => word.to_string(),
        };
        return if restates || detail.is_empty() {
            head
        } else {
            format!("{head} · {detail}")
        };
    }
    let mut line = word.to_string();
    if let Some((channel, to)) = route {
        line.push_str(&format!(" to {channel} {to}"));
    }
    if !detail.is_empty() && detail != word {
        line.push_str(" · ");
        line.push_str(detail);
    }
    line
}

wire_enum! {
    /// How a sub-agent's run ended. Note the space in `timed out` (a run's status says
    /// `timeout`): the spawn's word is what OpenClaw's sub-agent announce says.
    "spawn outcome"
    pub enum SpawnOutcome {
        Completed = "completed",
        Failed = "failed",
        TimedOut = "timed out",
    }
}

wire_enum! {
    /// What is being sent, for the send policy and deliveries: a `sessions_send` into a
    /// session, an announce out of one, or a reply-round message.
    "send kind"
    pub enum SendKind {
        Send = "send",
        Announce = "announce",
        Reply = "reply",
    }
}

wire_enum! {
    /// Which step of the work a run is: the answer to a message, a reply round of an
    /// exchange, an exchange's announce, a sub-agent's task, or its completion announce.
    "step"
    pub enum Step {
        Message = "message",
        Reply = "reply",
        Announce = "announce",
        Subagent = "subagent",
        SubagentAnnounce = "subagent-announce",
    }
}

wire_enum! {
    /// Which storage condition a call met, by what the user does next.
    "storage failure"
    pub enum StorageKind {
        /// Another process holds the database locked: retry once it is done.
        Busy = "busy",
        /// The disk is full: free space, then retry.
        DiskFull = "disk_full",
        /// The state folder cannot be written by this user.
        ReadOnly = "read_only",
        /// Stored data is damaged: restore or move the database aside.
        Corrupt = "corrupt",
        /// A newer Switchboard wrote the database: upgrade.
        NewerSchema = "newer_schema",
        /// Anything else (or a kind this build does not know).
        #[serde(other)]
        Other = "other",
    }
}

wire_enum! {
    /// What happens to a sub-agent's session once its run is over.
    "cleanup"
    pub enum Cleanup {
        Keep = "keep",
        Delete = "delete",
    }
}

impl RunStatus {
    /// The run is over (any status but `Running`).
    pub fn is_over(self) -> bool {
        self != RunStatus::Running
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;
    use std::str::FromStr;

    /// Every variant's wire word goes out as itself (JSON string), comes back as the same
    /// variant through serde and through `FromStr`, and `as_str` agrees.
    fn round_trips<T>(all: &[T])
    where
        T: Copy
            + PartialEq
            + fmt::Debug
            + fmt::Display
            + FromStr<Err = UnknownWord>
            + serde::Serialize
            + serde::de::DeserializeOwned,
    {
        for v in all {
            let word = v.to_string();
            let json = serde_json::to_string(v).expect("serialise");
            assert_eq!(json, serde_json::to_string(&word).expect("string"), "{v:?}");
            assert_eq!(serde_json::from_str::<T>(&json).expect("deserialise"), *v);
            assert_eq!(word.parse::<T>().expect("parse"), *v);
        }
        assert!("no such word".parse::<T>().is_err());
    }

    #[test]
    fn every_enum_round_trips_through_its_wire_word() {
        round_trips(RunStatus::ALL);
        round_trips(ExchangeStatus::ALL);
        round_trips(ExchangeKind::ALL);
        round_trips(ExchangeEnd::ALL);
        round_trips(AnnounceOutcome::ALL);
        round_trips(SpawnOutcome::ALL);
        round_trips(SendKind::ALL);
        round_trips(Step::ALL);
        round_trips(Cleanup::ALL);
        round_trips(StorageKind::ALL);
    }

    /// The words the wire carried before these were enums (strings in the engine), each
    /// spelled out here once more so a changed spelling fails.
    #[test]
    fn the_wire_words_are_the_old_ones() {
        let table: &[(&str, &[&str])] = &[
            ("run", &["ok", "error", "timeout", "aborted", "running"]),
            (
                "exchange status",
                &["running", "done", "interrupted", "refused"],
            ),
            ("exchange kind", &["send", "refused", "chain"]),
            (
                "exchange end",
                &[
                    "cap",
                    "reply_skip",
                    "empty",
                    "error",
                    "timeout",
                    "aborted",
                    "self",
                    "disabled",
                    "policy",
                    "no_reply",
                    "chain",
                    "the engine stopped during the exchange",
                    "not_recorded",
                    "unknown",
                ],
            ),
            (
                "announce",
                &[
                    "delivered",
                    "skipped",
                    "blocked",
                    "no_route",
                    "failed",
                    "not_run",
                    "running",
                    "not_recorded",
                    "unknown",
                ],
            ),
            ("spawn", &["completed", "failed", "timed out"]),
            ("send kind", &["send", "announce", "reply"]),
            (
                "step",
                &[
                    "message",
                    "reply",
                    "announce",
                    "subagent",
                    "subagent-announce",
                ],
            ),
            ("cleanup", &["keep", "delete"]),
        ];
        let words = |all: Vec<&'static str>| all;
        let actual: Vec<Vec<&str>> = vec![
            words(RunStatus::ALL.iter().map(|v| v.as_str()).collect()),
            words(ExchangeStatus::ALL.iter().map(|v| v.as_str()).collect()),
            words(ExchangeKind::ALL.iter().map(|v| v.as_str()).collect()),
            words(ExchangeEnd::ALL.iter().map(|v| v.as_str()).collect()),
            words(AnnounceOutcome::ALL.iter().map(|v| v.as_str()).collect()),
            words(SpawnOutcome::ALL.iter().map(|v| v.as_str()).collect()),
            words(SendKind::ALL.iter().map(|v| v.as_str()).collect()),
            words(Step::ALL.iter().map(|v| v.as_str()).collect()),
            words(Cleanup::ALL.iter().map(|v| v.as_str()).collect()),
        ];
        for ((name, want), got) in table.iter().zip(actual) {
            assert_eq!(&got, want, "{name}");
        }
    }

    /// A newer peer's reason or outcome decodes as `Unknown` instead of failing the page.
    #[test]
    fn unknown_words_from_a_peer_decode_as_unknown() {
        let end: ExchangeEnd = serde_json::from_str("\"a_new_reason\"").expect("decode");
        assert_eq!(end, ExchangeEnd::Unknown);
        let out: AnnounceOutcome = serde_json::from_str("\"a_new_outcome\"").expect("decode");
        assert_eq!(out, AnnounceOutcome::Unknown);
    }
}

#[cfg(test)]
mod announce_tests {
    use super::*;

    /// An announce reads as one truth whatever its record holds: a queued one names where
    /// it waits once, the others say their word, route and detail.
    #[test]
    fn an_announce_says_each_fact_once() {
        let queued = AnnounceOutcome::Delivered;
        let route = Some(("slack", "group:incidents"));
        for detail in [
            "queued for slack group:incidents",
            "delivered to slack group:incidents",
            "",
        ] {
            assert_eq!(
                announce_line(queued, queued.shown(), route, detail),
                "queued for slack group:incidents",
                "{detail:?}"
            );
            if !detail.is_empty() {
                assert_eq!(
                    announce_line(queued, queued.shown(), None, detail),
                    "queued for slack group:incidents"
                );
            }
        }
        assert_eq!(announce_line(queued, "queued", None, ""), "queued");
        assert_eq!(
            announce_line(queued, "queued", route, "retried once"),
            "queued for slack group:incidents · retried once"
        );
        let blocked = AnnounceOutcome::Blocked;
        assert_eq!(
            announce_line(blocked, blocked.shown(), None, "send policy denies"),
            "blocked · send policy denies"
        );
        assert_eq!(
            announce_line(AnnounceOutcome::Skipped, "skipped", None, "skipped"),
            "skipped"
        );
    }
}
