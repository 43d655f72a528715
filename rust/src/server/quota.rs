//! Client quotas (KIP-13, KIP-55, KIP-124): produce and fetch byte rates and request time
//! per (user, client id), measured and enforced in the network thread, where Produce and
//! Fetch are served (the Python handlers record their requests' time through `record_request`
//! and the network thread mutes the connection as for the others).
//!
//! Configuration (pushed whole by the control plane, python/logbroker/broker/quotas.py, each
//! time the metadata image's client quotas change; `set_quotas`): a list of quota entities,
//! each with an optional `producer_byte_rate` and `consumer_byte_rate` (bytes per second) and
//! `request_percentage` (percent of one thread's time: 100 is one thread all the time).
//! An entity is Kafka's: a user component, a client-id component or both, each a name or
//! the default (`<default>`, `None` here). Which entity applies to a request by user `u`
//! (the principal's name, `ANONYMOUS` on a PLAINTEXT listener) with client id `c` is
//! Kafka's precedence (its DefaultQuotaCallback), the first that has a quota of the type:
//!
//! ```text
//!   1. users=u,         clients=c          the rate is measured per (u, c)
//!   2. users=u,         clients=<default>  per (u, c)
//!   3. users=u                             per u (all its client ids together)
//!   4. users=<default>, clients=c          per (u, c)
//!   5. users=<default>, clients=<default>  per (u, c)
//!   6. users=<default>                     per u
//!   7. clients=c                           per c (all users together)
//!   8. clients=<default>                   per c
//! ```
//!
//! None applies: no limit, nothing recorded.
//!
//! Measuring (Kafka's `Rate` over a `SampledStat`): `quota.window.num` windows (default 11)
//! of `quota.window.size.seconds` (default 1). A value goes into the current window, a new
//! window starts when the current one is `window` old, and windows older than `num *
//! window` are reset. The rate is the sum of the windows over the elapsed time since the
//! oldest window started, counted as at least `(num - 1) * window` (so a first burst is not
//! divided by a few milliseconds).
//!
//! Request time (Kafka's ClientRequestQuotaManager): a request's handling time in
//! nanoseconds is recorded as `ns * 100 / 1e9` (percent-seconds), so the rate is the percent
//! of one thread the client kept busy over the windows. Exempt, as in Kafka: follower fetches,
//! acks=0 produces, cluster actions and the controller listener's requests (the callers
//! decide; broker/dispatch.py for the Python side).
//!
//! Throttling (Kafka's QuotaUtils.throttleTime): after recording, a rate `r` above the quota
//! `q` gives `throttle = (r - q) / q * window span` milliseconds, the time it takes the
//! average to come back to the quota, here capped at `num * window` for byte rates and at
//! one window for request time (Kafka's boundedThrottleTime with `quota.window.size.seconds`).
//! The response carries it in `throttle_time_ms` (the larger of the byte-rate and
//! request-time throttles when both apply, as Kafka), and the network thread stops reading
//! the connection's requests for that long once the response is queued (KIP-219). A fetch
//! response is capped to what the quota allows in `(num - 1)` windows (Kafka's
//! getMaxValueInQuotaWindow).
//!
//! Invariants: the sensors are only touched by the network thread (the lock is never
//! contended by it); a sensor not written to for `num * window` holds nothing and is
//! dropped; counters (`stats`) are monotonic.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError, RwLock};

/// Quota types (index into the per-type tables).
pub const PRODUCE: usize = 0;
pub const FETCH: usize = 1;
pub const REQUEST: usize = 2;
const TYPES: usize = 3;
/// Nanoseconds of request time to percent-seconds (Kafka's NanosToPercentagePerSecond).
const NANOS_TO_PERCENT_SECONDS: f64 = 100.0 / 1e9;

/// Kafka's entity types.
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";

/// One component of a quota entity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Component {
    /// The entity has no component of this type.
    #[default]
    Absent,
    /// `<default>`: every name without its own entity.
    Default,
    Named(String),
}

/// A quota entity: a user and a client-id component.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Entity {
    pub user: Component,
    pub client_id: Component,
}

/// The quotas of one entity: bytes per second, and percent of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Limits {
    pub producer_byte_rate: Option<f64>,
    pub consumer_byte_rate: Option<f64>,
    pub request_percentage: Option<f64>,
}

impl Limits {
    fn of(&self, kind: usize) -> Option<f64> {
        match kind {
            PRODUCE => self.producer_byte_rate,
            FETCH => self.consumer_byte_rate,
            _ => self.request_percentage,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    UserAndClient,
    User,
    Client,
}

/// One window of a rate.
#[derive(Debug, Clone, Copy)]
struct Window {
    start_ms: i64,
    value: f64,
}

/// Kafka's `Rate` over a `SampledStat` (see the module doc).
#[derive(Debug, Default)]
struct Rate {
    windows: Vec<Window>,
    current: usize,
    last_record_ms: i64,
}

impl Rate {
    fn record(&mut self, value: f64, now_ms: i64, num: usize, window_ms: i64) {
        self.last_record_ms = now_ms;
        if self.windows.is_empty() {
            self.windows.push(Window { start_ms: now_ms, value: 0.0 });
            self.current = 0;
        } else if now_ms - self.windows[self.current].start_ms >= window_ms {
            self.current = (self.current + 1) % num;
            let fresh = Window { start_ms: now_ms, value: 0.0 };
            if self.current >= self.windows.len() {
                self.windows.push(fresh);
            } else {
                self.windows[self.current] = fresh;
            }
        }
        self.windows[self.current].value += value;
    }

    /// Resets windows older than the whole span.
    fn purge(&mut self, now_ms: i64, num: usize, window_ms: i64) {
        let span = window_ms * i64::try_from(num).unwrap_or(i64::MAX);
        for w in &mut self.windows {
            if now_ms - w.start_ms >= span {
                *w = Window { start_ms: now_ms, value: 0.0 };
            }
        }
    }

    /// The elapsed time the rate divides by, milliseconds (Kafka's `Rate.windowSize`).
    fn window_size_ms(&mut self, now_ms: i64, num: usize, window_ms: i64) -> i64 {
        self.purge(now_ms, num, window_ms);
        let oldest = self.windows.iter().map(|w| w.start_ms).min().unwrap_or(now_ms);
        let mut elapsed = now_ms - oldest;
        let full = elapsed / window_ms;
        let min_full = i64::try_from(num).unwrap_or(i64::MAX) - 1;
        if full < min_full {
            elapsed += (min_full - full) * window_ms;
        }
        elapsed.max(1)
    }

    /// The rate per second now, and the window size it was measured over (ms).
    fn measure(&mut self, now_ms: i64, num: usize, window_ms: i64) -> (f64, i64) {
        let size = self.window_size_ms(now_ms, num, window_ms);
        let total: f64 = self.windows.iter().map(|w| w.value).sum();
        (total / (size as f64 / 1000.0), size)
    }
}

#[derive(Debug)]
struct Config {
    window_num: usize,
    window_ms: i64,
    /// Per quota type: entity -> its quota (only entities with that type's key).
    quotas: [HashMap<Entity, f64>; TYPES],
}

impl Default for Config {
    fn default() -> Self {
        Config { window_num: 11, window_ms: 1000, quotas: [HashMap::new(), HashMap::new(), HashMap::new()] }
    }
}

/// Throttle counters of one quota type (for the metrics endpoint).
#[derive(Debug, Default)]
struct TypeStats {
    throttled: AtomicU64,
    throttle_ms: AtomicU64,
}

#[derive(Debug, Default)]
pub struct ClientQuotas {
    /// Some quota of each type is configured: the data path skips everything otherwise.
    any: [AtomicBool; TYPES],
    config: RwLock<Config>,
    /// (type, user tag, client tag) -> its rate; tags are "" where the scope leaves them out.
    sensors: Mutex<HashMap<(usize, String, String), Rate>>,
    last_purge_ms: AtomicU64,
    stats: [TypeStats; TYPES],
}

fn named(name: &str) -> Component {
    Component::Named(name.to_owned())
}

impl ClientQuotas {
    pub fn new() -> Self {
        Self::default()
    }

    /// `quota.window.num` and `quota.window.size.seconds` (as milliseconds).
    pub fn configure(&self, window_num: usize, window_ms: i64) {
        let mut c = self.config.write().unwrap_or_else(PoisonError::into_inner);
        c.window_num = window_num.max(1);
        c.window_ms = window_ms.max(1);
        drop(c);
        self.sensors.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// Replaces every quota.
    pub fn set_quotas(&self, quotas: &[(Entity, Limits)]) {
        let mut c = self.config.write().unwrap_or_else(PoisonError::into_inner);
        for (kind, table) in c.quotas.iter_mut().enumerate() {
            table.clear();
            for (entity, limits) in quotas {
                if let Some(rate) = limits.of(kind) {
                    table.insert(entity.clone(), rate);
                }
            }
            self.any[kind].store(!table.is_empty(), Ordering::Release);
        }
    }

    pub fn enabled(&self, kind: usize) -> bool {
        self.any[kind].load(Ordering::Acquire)
    }

    /// The quota that applies to `user` with `client_id` (Kafka's precedence, module doc),
    /// and the scope its rate is measured over.
    fn resolve(table: &HashMap<Entity, f64>, user: &str, client_id: &str) -> Option<(f64, Scope)> {
        let order: [(Entity, Scope); 8] = [
            (Entity { user: named(user), client_id: named(client_id) }, Scope::UserAndClient),
            (Entity { user: named(user), client_id: Component::Default }, Scope::UserAndClient),
            (Entity { user: named(user), client_id: Component::Absent }, Scope::User),
            (Entity { user: Component::Default, client_id: named(client_id) }, Scope::UserAndClient),
            (Entity { user: Component::Default, client_id: Component::Default }, Scope::UserAndClient),
            (Entity { user: Component::Default, client_id: Component::Absent }, Scope::User),
            (Entity { user: Component::Absent, client_id: named(client_id) }, Scope::Client),
            (Entity { user: Component::Absent, client_id: Component::Default }, Scope::Client),
        ];
        order.into_iter().find_map(|(e, scope)| table.get(&e).map(|&q| (q, scope)))
    }

    /// The quota (bytes per second, or percent for REQUEST) that applies, if any.
    pub fn quota_for(&self, kind: usize, user: &str, client_id: &str) -> Option<f64> {
        if !self.enabled(kind) {
            return None;
        }
        let c = self.config.read().unwrap_or_else(PoisonError::into_inner);
        Self::resolve(&c.quotas[kind], user, client_id).map(|(q, _)| q)
    }

    /// The most one response may carry without certain throttling (Kafka's
    /// getMaxValueInQuotaWindow): the quota times `(num - 1)` windows.
    pub fn max_value_in_window(&self, kind: usize, user: &str, client_id: &str) -> Option<f64> {
        let q = self.quota_for(kind, user, client_id)?;
        let c = self.config.read().unwrap_or_else(PoisonError::into_inner);
        Some(q * (c.window_num - 1) as f64 * c.window_ms as f64 / 1000.0)
    }

    /// Records `bytes` for `user`/`client_id` at `now_ms`; the throttle time (ms, 0 within
    /// the quota or without one).
    pub fn record(&self, kind: usize, user: &str, client_id: &str, bytes: u64, now_ms: i64) -> i32 {
        if !self.enabled(kind) {
            return 0;
        }
        self.record_value(kind, user, client_id, bytes as f64, now_ms)
    }

    /// Records `nanos` of request handling time for `user`/`client_id` at `now_ms` (Kafka's
    /// request quota); the throttle time (ms, at most one window; 0 within the quota or
    /// without one).
    pub fn record_request(&self, user: &str, client_id: &str, nanos: u64, now_ms: i64) -> i32 {
        if !self.enabled(REQUEST) {
            return 0;
        }
        self.record_value(REQUEST, user, client_id, nanos as f64 * NANOS_TO_PERCENT_SECONDS, now_ms)
    }

    fn record_value(&self, kind: usize, user: &str, client_id: &str, value: f64, now_ms: i64) -> i32 {
        let c = self.config.read().unwrap_or_else(PoisonError::into_inner);
        let Some((quota, scope)) = Self::resolve(&c.quotas[kind], user, client_id) else { return 0 };
        let (num, window_ms) = (c.window_num, c.window_ms);
        drop(c);
        let tags = match scope {
            Scope::UserAndClient => (user.to_owned(), client_id.to_owned()),
            Scope::User => (user.to_owned(), String::new()),
            Scope::Client => (String::new(), client_id.to_owned()),
        };
        let mut sensors = self.sensors.lock().unwrap_or_else(PoisonError::into_inner);
        let span = window_ms * i64::try_from(num).unwrap_or(i64::MAX);
        let last = i64::try_from(self.last_purge_ms.load(Ordering::Relaxed)).unwrap_or(0);
        if now_ms - last >= span {
            sensors.retain(|_, r| now_ms - r.last_record_ms < span);
            self.last_purge_ms.store(u64::try_from(now_ms).unwrap_or(0), Ordering::Relaxed);
        }
        let rate = sensors.entry((kind, tags.0, tags.1)).or_default();
        rate.record(value, now_ms, num, window_ms);
        let (observed, size_ms) = rate.measure(now_ms, num, window_ms);
        if observed <= quota || quota <= 0.0 {
            return 0;
        }
        let cap = if kind == REQUEST { window_ms } else { span };
        let throttle = ((observed - quota) / quota * size_ms as f64).round().min(cap as f64).max(0.0) as i32;
        if throttle > 0 {
            self.stats[kind].throttled.fetch_add(1, Ordering::Relaxed);
            self.stats[kind].throttle_ms.fetch_add(u64::try_from(throttle).unwrap_or(0), Ordering::Relaxed);
        }
        throttle
    }

    /// Per quota type (produce, fetch, request): throttled responses and their total
    /// throttle time (ms).
    pub fn stats(&self) -> [(u64, u64); TYPES] {
        [PRODUCE, FETCH, REQUEST].map(|k| {
            (self.stats[k].throttled.load(Ordering::Relaxed), self.stats[k].throttle_ms.load(Ordering::Relaxed))
        })
    }
}

/// The user name of a principal `Type:name` (Kafka's `KafkaPrincipal.getName`).
pub fn user_of(principal: &str) -> &str {
    principal.split_once(':').map_or(principal, |(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "-": absent, "*": the default, else a name.
    fn component(c: &str) -> Component {
        match c {
            "-" => Component::Absent,
            "*" => Component::Default,
            name => named(name),
        }
    }

    fn entity(user: &str, client: &str) -> Entity {
        Entity { user: component(user), client_id: component(client) }
    }

    fn produce(rate: f64) -> Limits {
        Limits { producer_byte_rate: Some(rate), ..Limits::default() }
    }

    #[test]
    fn precedence_is_kafkas() {
        let q = ClientQuotas::new();
        let mut all = vec![
            (entity("-", "*"), produce(8.0)),
            (entity("-", "c"), produce(7.0)),
            (entity("*", "-"), produce(6.0)),
            (entity("*", "*"), produce(5.0)),
            (entity("*", "c"), produce(4.0)),
            (entity("u", "-"), produce(3.0)),
            (entity("u", "*"), produce(2.0)),
            (entity("u", "c"), produce(1.0)),
        ];
        for expected in (1..=8).map(f64::from) {
            q.set_quotas(&all);
            assert_eq!(q.quota_for(PRODUCE, "u", "c"), Some(expected));
            assert_eq!(q.quota_for(FETCH, "u", "c"), None);
            all.pop();
        }
        q.set_quotas(&all);
        assert_eq!(q.quota_for(PRODUCE, "u", "c"), None);
        assert!(!q.enabled(PRODUCE));
    }

    #[test]
    fn rate_is_measured_over_the_windows_and_throttles_as_kafka() {
        let q = ClientQuotas::new();
        q.configure(11, 1000);
        q.set_quotas(&[(entity("-", "c"), produce(1000.0))]);
        // 10 s worth of quota at once: rate 10_000 / 10 s = 1000/s, not above
        assert_eq!(q.record(PRODUCE, "u", "c", 10_000, 0), 0);
        // 1000 more: 11_000 / 10 s = 1100/s, 10% over: throttle 10% of 10 s
        assert_eq!(q.record(PRODUCE, "u", "c", 1000, 0), 1000);
        // another client id has no quota
        assert_eq!(q.record(PRODUCE, "u", "d", 1_000_000, 0), 0);
        // the user scope is not involved: another user with client c shares the sensor
        assert!(q.record(PRODUCE, "v", "c", 1000, 1) > 0);
        // after the whole span everything has aged out
        assert_eq!(q.record(PRODUCE, "u", "c", 1000, 12_000), 0);
        let [(n, ms), (f, _), (r, _)] = q.stats();
        assert_eq!((n, f, r), (2, 0, 0));
        assert!(ms >= 1000);
    }

    #[test]
    fn throttle_is_capped_at_the_span_and_fetch_is_capped() {
        let q = ClientQuotas::new();
        q.configure(11, 1000);
        q.set_quotas(&[(entity("*", "-"), Limits { consumer_byte_rate: Some(100.0), ..Limits::default() })]);
        assert_eq!(q.record(FETCH, "anyone", "x", 1_000_000, 5), 11_000);
        assert_eq!(q.max_value_in_window(FETCH, "anyone", "x"), Some(1000.0));
        assert_eq!(q.max_value_in_window(PRODUCE, "anyone", "x"), None);
    }

    #[test]
    fn request_time_is_a_percentage_of_a_thread_capped_at_one_window() {
        let q = ClientQuotas::new();
        q.configure(11, 1000);
        q.set_quotas(&[(entity("-", "busy"), Limits { request_percentage: Some(10.0), ..Limits::default() })]);
        assert!(q.enabled(REQUEST) && !q.enabled(PRODUCE));
        // 1 s of handling in 10 s of windows is 10% of a thread: at the quota
        assert_eq!(q.record_request("u", "busy", 1_000_000_000, 0), 0);
        // 0.1 s more: 11%, 10% over: 10% of the 10 s window size
        assert_eq!(q.record_request("u", "busy", 100_000_000, 0), 1000);
        // far over: Kafka bounds a request throttle to one window
        assert_eq!(q.record_request("u", "busy", 50_000_000_000, 1), 1000);
        // another client id has no request quota, and byte rates are not involved
        assert_eq!(q.record_request("u", "idle", 50_000_000_000, 1), 0);
        assert_eq!(q.record(PRODUCE, "u", "busy", 1 << 30, 1), 0);
        let [_, _, (r, ms)] = q.stats();
        assert_eq!((r, ms), (2, 2000));
    }

    #[test]
    fn user_of_a_principal() {
        assert_eq!(user_of("User:alice"), "alice");
        assert_eq!(user_of("User:ANONYMOUS"), "ANONYMOUS");
        assert_eq!(user_of("plain"), "plain");
    }
}
