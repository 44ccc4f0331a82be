//! Fault injection for the whole network (the control API's `/faults`).

use super::*;

impl Net {
    pub fn faults(&self) -> Faults {
        self.lock().faults.clone()
    }

    /// Sets fault injection; `drop_connections` closes every connection now.
    pub fn set_faults(&self, mut f: Faults) -> Result<Faults, NetError> {
        if !(0.0..=1.0).contains(&f.error_rate) {
            return Err(NetError::Invalid("error_rate must be between 0 and 1"));
        }
        let mut s = self.lock();
        if f.drop_connections {
            // A network drop, not a logout: dropping the senders ends each connection's
            // writer, which closes its socket; linked devices stay linked.
            s.conns.clear();
            s.online.clear();
            s.qr.clear();
            s.codes.clear();
            f.drop_connections = false;
        }
        s.faults = f.clone();
        Ok(f)
    }
}
