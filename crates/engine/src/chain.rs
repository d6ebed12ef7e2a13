//! The chain of agent-to-agent sends and spawns a message belongs to, so loops are cut.
//! A leaf: runs and tools both need it, and neither may import the other for it.

use serde_json::Value;

/// The chain of agent-to-agent sends a message belongs to: its id and how many sends deep
/// it is. Carried in provenance so loops across three or more agents can be cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub id: String,
    pub hop: u32,
}

impl Chain {
    /// The chain of a new send or spawn: the calling run's, one hop further, or a new one
    /// for a person's call (hop 1).
    pub fn next(calling: Option<&Chain>) -> Chain {
        match calling {
            Some(c) => Chain {
                id: c.id.clone(),
                hop: c.hop.saturating_add(1),
            },
            None => Chain {
                id: uuid::Uuid::new_v4().to_string(),
                hop: 1,
            },
        }
    }

    /// The chain recorded in a message's `provenance` (`chainId`, `hop`), if any.
    pub fn from_provenance(message: &Value) -> Option<Chain> {
        let p = message.get("provenance")?;
        Some(Chain {
            id: p.get("chainId")?.as_str()?.to_string(),
            hop: u32::try_from(p.get("hop")?.as_u64()?).ok()?,
        })
    }
}
