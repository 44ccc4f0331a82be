//! Hidden ids (LIDs): every account has one, and the network may address an account to
//! others by it rather than by its number, as WhatsApp does. How a phone is addressed is
//! its own setting (`Addressing`), applied to the copies of its messages that linked
//! devices receive (and the history they sync).

use super::*;

/// How the network names an account to others' linked devices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Addressing {
    /// By number (the default).
    #[default]
    Pn,
    /// By hidden id, with the number told beside it.
    Lid,
    /// By hidden id alone: the number is not told.
    LidHidden,
}

/// An account's hidden id: 15 digits, fixed for the number (FNV-1a of it), so tests and
/// demos can name it.
pub fn lid_of(number: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in number.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("2{:014}", h % 100_000_000_000_000)
}

/// Names a party (its number, and the hidden-id field beside it) as `mode` says.
fn name(mode: Addressing, number: &mut String, lid: &mut Option<String>) {
    match mode {
        Addressing::Pn => {}
        Addressing::Lid => *lid = Some(lid_of(number)),
        Addressing::LidHidden => {
            *lid = Some(lid_of(number));
            number.clear();
        }
    }
}

impl State {
    /// The account a hidden id names.
    pub(super) fn phone_by_lid(&self, lid: &str) -> Option<String> {
        self.phones.keys().find(|n| lid_of(n) == lid).cloned()
    }

    /// The copy of `msg` that the linked devices of `account` see: its other party named
    /// as that party's addressing says.
    pub(super) fn addressed(&self, account: &str, mut msg: SimMessage) -> SimMessage {
        let mode = |n: &str| self.phones.get(n).map(|p| p.addressing).unwrap_or_default();
        if msg.from != account {
            name(mode(&msg.from), &mut msg.from, &mut msg.from_lid);
        } else if msg.group.is_none() && msg.to != account {
            name(mode(&msg.to), &mut msg.to, &mut msg.to_lid);
        }
        msg
    }

    /// An event for `account`'s devices, its message addressed as its party's setting
    /// says (history is addressed as it is made).
    pub(super) fn addressed_event(&self, account: &str, ev: ServerEv) -> ServerEv {
        match ev {
            ServerEv::Message { message, from_me } => {
                ServerEv::Message { message: self.addressed(account, message), from_me }
            }
            ev => ev,
        }
    }
}

impl Net {
    /// Sets how the network names `number` to others; returns its hidden id.
    pub fn set_addressing(&self, number: &str, mode: Addressing) -> Result<String, NetError> {
        let mut s = self.lock();
        let p = s.phones.get_mut(number).ok_or(NetError::NoAccount)?;
        p.addressing = mode;
        Ok(lid_of(number))
    }

    /// How the network names `number` to others.
    pub fn addressing(&self, number: &str) -> Option<Addressing> {
        self.lock().phones.get(number).map(|p| p.addressing)
    }
}
