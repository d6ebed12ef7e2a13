//! The drill-down, k9s-style: a traffic pair's or a session's exchanges as a list over the
//! body (newest first, paged), the exchange view over it, and Esc walking back one level at
//! a time; the header shows where the owner is as a breadcrumb.

use crate::exchanges::{ExchangeView, Exchanges, ListId, Scope};
use crate::names::Names;

/// Where the list was opened from, which is where Esc returns to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Enter on a traffic row: Esc goes back to the traffic view.
    Traffic,
    /// The exchanges key on a session: Esc goes back to the panes.
    Sessions,
}

/// The list opened by drilling down.
#[derive(Debug, Clone)]
pub struct Drill {
    pub origin: Origin,
    pub list: Exchanges,
}

/// What the breadcrumb names an exchange by: the start of its id, as `exchanges show` takes it.
const SHORT_ID: usize = 8;

impl Drill {
    pub fn new(origin: Origin, scope: Scope) -> Drill {
        Drill {
            origin,
            list: Exchanges::new(ListId::Drill, scope),
        }
    }

    /// The levels down to here: `Traffic › main → ops › 01a2b3c4…` (with the exchange when
    /// its view is open over the list).
    pub fn breadcrumb(&self, names: &Names, open: Option<&ExchangeView>) -> Vec<String> {
        let mut crumbs = vec![match self.origin {
            Origin::Traffic => "Traffic".to_string(),
            Origin::Sessions => "Sessions".to_string(),
        }];
        match &self.list.scope {
            Scope::Pair(p) => crumbs.push(format!(
                "{} → {}",
                names.full(&p.requester),
                names.full(&p.target)
            )),
            Scope::Session(k) => crumbs.push(format!("{} · exchanges", names.full(k))),
            Scope::All | Scope::Nothing => {}
        }
        if let Some(v) = open {
            let id: String = v.id().chars().take(SHORT_ID).collect();
            let cut = if v.id().chars().count() > SHORT_ID {
                "…"
            } else {
                ""
            };
            crumbs.push(format!("{id}{cut}"));
        }
        crumbs
    }
}
