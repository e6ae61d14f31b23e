//! `support`: an airline customer-service agent in the style of tau-bench.
//!
//! The policy is the system prompt. A travel coordinator handles many bookings for a team
//! offsite in one long session: the agent asks for the user id, looks up the profile and each
//! reservation (one tool call at a time, no text next to a call, JSON written as Python's
//! `json.dumps` does), searches direct and one-stop flights (long result lists), lists the
//! action and waits for an explicit "yes" before any write, changes flights, adds bags,
//! books for a new colleague, refuses what the policy forbids, and offers a certificate after
//! a complaint where the policy allows it. As in the recorded airline trajectories, two
//! consecutive searches sometimes reuse one call id; results then pair by position.
//!
//! Planted facts: the task (message 1), the user id, the certificate in the profile, the
//! reservations changed (old and new flight numbers), the reservation booked, every refusal
//! with its reason and every choice the user made, and the request left for next.

use compaction::{Conversation, ProbeKind};

use super::build::{fill_text, int, money, obj, q, s, Builder, Call, IdStyle, J};
use super::rng::Rng;
use super::Spec;

const AIRPORTS: &[(&str, &str)] = &[
    ("JFK", "New York"),
    ("LGA", "New York"),
    ("EWR", "Newark"),
    ("BOS", "Boston"),
    ("PHL", "Philadelphia"),
    ("ATL", "Atlanta"),
    ("MIA", "Miami"),
    ("MCO", "Orlando"),
    ("CLT", "Charlotte"),
    ("ORD", "Chicago"),
    ("DTW", "Detroit"),
    ("MSP", "Minneapolis"),
    ("DFW", "Dallas"),
    ("IAH", "Houston"),
    ("DEN", "Denver"),
    ("PHX", "Phoenix"),
    ("LAS", "Las Vegas"),
    ("LAX", "Los Angeles"),
    ("SFO", "San Francisco"),
    ("SEA", "Seattle"),
];

/// Where the coordinator's office is: airport, city, state, zip.
const HUBS: &[(&str, &str, &str, &str)] = &[
    ("JFK", "New York", "NY", "10014"),
    ("BOS", "Boston", "MA", "02110"),
    ("ORD", "Chicago", "IL", "60601"),
    ("SFO", "San Francisco", "CA", "94105"),
    ("SEA", "Seattle", "WA", "98101"),
    ("ATL", "Atlanta", "GA", "30303"),
];

const FIRST: &[&str] = &[
    "Sofia", "Liam", "Aarav", "Mei", "Noah", "Chloe", "Omar", "Isabella", "Ethan", "Yara", "Lucas", "Amara", "Daniel",
    "Priya", "Mateo", "Hana",
];
const LAST: &[&str] = &[
    "Kim", "Johnson", "Patel", "Nguyen", "Garcia", "Rossi", "Hassan", "Silva", "Brown", "Okafor", "Muller", "Tanaka",
    "Lopez", "Singh", "Cohen", "Ivanova",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Cabin {
    Basic,
    Economy,
    Business,
}

impl Cabin {
    fn key(self) -> &'static str {
        match self {
            Cabin::Basic => "basic_economy",
            Cabin::Economy => "economy",
            Cabin::Business => "business",
        }
    }
    /// The fare of a flight in this cabin, in dollars (the flight's price is the economy fare
    /// in cents).
    fn fare(self, f: &Flight) -> i64 {
        let base = f.price / 100;
        match self {
            Cabin::Basic => base * 6 / 10,
            Cabin::Economy => base,
            Cabin::Business => base * 3,
        }
    }
    fn words(self) -> &'static str {
        match self {
            Cabin::Basic => "basic economy",
            Cabin::Economy => "economy",
            Cabin::Business => "business",
        }
    }
}

#[derive(Clone)]
struct Flight {
    number: String,
    origin: &'static str,
    dest: &'static str,
    date: String,
    day: i64,
    dep: u32,
    arr: u32,
    price: i64,
}

#[derive(Clone)]
struct Pax {
    first: &'static str,
    last: &'static str,
    dob: String,
}

#[derive(Clone)]
struct Reservation {
    id: String,
    origin: &'static str,
    dest: &'static str,
    round_trip: bool,
    cabin: Cabin,
    flights: Vec<Flight>,
    pax: Vec<Pax>,
    bags: u64,
    nonfree: u64,
    insurance: bool,
    created: String,
    payment: String,
    /// A second payment method after `payment` (a certificate first, then a card): its id.
    rest_on: Option<String>,
    /// What `payment` covered when `rest_on` took the rest.
    first_amount: i64,
}

impl Reservation {
    fn total(&self) -> i64 {
        self.flights.iter().map(|f| self.cabin.fare(f)).sum::<i64>() * self.pax.len() as i64
    }
    /// The payment history: (payment id, dollars).
    fn paid(&self) -> Vec<(&str, i64)> {
        let total = self.total();
        match &self.rest_on {
            Some(card) => vec![
                (self.payment.as_str(), self.first_amount.min(total)),
                (card.as_str(), (total - self.first_amount).max(0)),
            ],
            None => vec![(self.payment.as_str(), total)],
        }
    }
}

struct World {
    first: &'static str,
    last: &'static str,
    user_id: String,
    email: String,
    tier: &'static str,
    card: (String, String),
    card2: (String, String),
    gift: (String, i64),
    cert: (String, i64),
    reservations: Vec<Reservation>,
    hub: (&'static str, &'static str, &'static str, &'static str),
    offsite_day: i64,
    today: i64,
}

fn hhmm(minutes: u32) -> String {
    let plus = if minutes >= 24 * 60 { "+1" } else { "" };
    let m = minutes % (24 * 60);
    format!("{:02}:{:02}:00{plus}", m / 60, m % 60)
}

impl World {
    fn flight(&self, rng: &mut Rng, origin: &'static str, dest: &'static str, day: i64) -> Flight {
        let dep = 30 * rng.range(10, 44) as u32;
        let dur = 30 * rng.range(3, 12) as u32;
        Flight {
            number: format!("HAT{:03}", rng.range(1, 299)),
            origin,
            dest,
            date: super::build::date(day),
            day,
            dep,
            arr: dep + dur,
            price: 100 * rng.range(50, 420) as i64,
        }
    }

    fn reservation(&self, rng: &mut Rng, origin: &'static str, dest: &'static str, pax: Vec<Pax>) -> Reservation {
        let round_trip = rng.chance(60);
        let day = self.offsite_day - rng.range(0, 1) as i64;
        let mut flights = vec![self.flight(rng, origin, dest, day)];
        if round_trip {
            let back = self.offsite_day + rng.range(2, 4) as i64;
            flights.push(self.flight(rng, dest, origin, back));
        }
        let cabin = match rng.below(10) {
            0..=2 => Cabin::Basic,
            3..=7 => Cabin::Economy,
            _ => Cabin::Business,
        };
        let bags = rng.range(0, pax.len() as u64);
        Reservation {
            id: rng.upper_alnum(6),
            origin,
            dest,
            round_trip,
            cabin,
            flights,
            pax,
            bags,
            nonfree: 0,
            insurance: rng.chance(40),
            created: format!(
                "{}T{:02}:{:02}:{:02}",
                super::build::date(self.today - rng.range(3, 40) as i64),
                rng.range(0, 23),
                rng.range(0, 59),
                rng.range(0, 59)
            ),
            payment: self.card.0.clone(),
            rest_on: None,
            first_amount: 0,
        }
    }
}

fn flight_json(f: &Flight, cabin: Option<Cabin>) -> J {
    let mut pairs = vec![
        ("flight_number", s(&f.number)),
        ("origin", s(f.origin)),
        ("destination", s(f.dest)),
        ("date", s(&f.date)),
    ];
    match cabin {
        Some(c) => pairs.push(("price", int(c.fare(f)))),
        None => {
            pairs.push(("scheduled_departure_time_est", s(hhmm(f.dep))));
            pairs.push(("scheduled_arrival_time_est", s(hhmm(f.arr))));
        }
    }
    obj(pairs)
}

fn search_json(rng: &mut Rng, f: &Flight) -> J {
    obj(vec![
        ("flight_number", s(&f.number)),
        ("origin", s(f.origin)),
        ("destination", s(f.dest)),
        ("scheduled_departure_time_est", s(hhmm(f.dep))),
        ("scheduled_arrival_time_est", s(hhmm(f.arr))),
        ("status", s("available")),
        (
            "available_seats",
            obj(vec![
                ("basic_economy", int(rng.range(0, 20) as i64)),
                ("economy", int(rng.range(0, 20) as i64)),
                ("business", int(rng.range(0, 20) as i64)),
            ]),
        ),
        (
            "prices",
            obj(vec![
                ("basic_economy", int(Cabin::Basic.fare(f))),
                ("economy", int(Cabin::Economy.fare(f))),
                ("business", int(Cabin::Business.fare(f))),
            ]),
        ),
        ("date", s(&f.date)),
    ])
}

fn reservation_json(r: &Reservation, user_id: &str) -> J {
    obj(vec![
        ("reservation_id", s(&r.id)),
        ("user_id", s(user_id)),
        ("origin", s(r.origin)),
        ("destination", s(r.dest)),
        ("flight_type", s(if r.round_trip { "round_trip" } else { "one_way" })),
        ("cabin", s(r.cabin.key())),
        ("flights", J::Arr(r.flights.iter().map(|f| flight_json(f, Some(r.cabin))).collect())),
        (
            "passengers",
            J::Arr(
                r.pax
                    .iter()
                    .map(|p| obj(vec![("first_name", s(p.first)), ("last_name", s(p.last)), ("dob", s(&p.dob))]))
                    .collect(),
            ),
        ),
        (
            "payment_history",
            J::Arr(
                r.paid()
                    .into_iter()
                    .map(|(id, amount)| obj(vec![("payment_id", s(id)), ("amount", int(amount))]))
                    .collect(),
            ),
        ),
        ("created_at", s(&r.created)),
        ("total_baggages", int(r.bags as i64)),
        ("nonfree_baggages", int(r.nonfree as i64)),
        ("insurance", s(if r.insurance { "yes" } else { "no" })),
    ])
}

fn user_json(w: &World) -> J {
    obj(vec![
        ("name", obj(vec![("first_name", s(w.first)), ("last_name", s(w.last))])),
        (
            "address",
            obj(vec![
                ("address1", s("417 Harbor Street")),
                ("address2", s("Suite 1200")),
                ("city", s(w.hub.1)),
                ("country", s("USA")),
                ("province", s(w.hub.2)),
                ("zip", s(w.hub.3)),
            ]),
        ),
        ("email", s(&w.email)),
        ("dob", s("1986-09-12")),
        (
            "payment_methods",
            obj(vec![
                (
                    w.card.0.as_str(),
                    obj(vec![
                        ("source", s("credit_card")),
                        ("brand", s("visa")),
                        ("last_four", s(&w.card.1)),
                        ("id", s(&w.card.0)),
                    ]),
                ),
                (
                    w.card2.0.as_str(),
                    obj(vec![
                        ("source", s("credit_card")),
                        ("brand", s("mastercard")),
                        ("last_four", s(&w.card2.1)),
                        ("id", s(&w.card2.0)),
                    ]),
                ),
                (
                    w.gift.0.as_str(),
                    obj(vec![("source", s("gift_card")), ("amount", int(w.gift.1)), ("id", s(&w.gift.0))]),
                ),
                (
                    w.cert.0.as_str(),
                    obj(vec![("source", s("certificate")), ("amount", int(w.cert.1)), ("id", s(&w.cert.0))]),
                ),
            ]),
        ),
        (
            "saved_passengers",
            J::Arr(
                w.reservations
                    .iter()
                    .take(3)
                    .map(|r| {
                        obj(vec![
                            ("first_name", s(r.pax[0].first)),
                            ("last_name", s(r.pax[0].last)),
                            ("dob", s(&r.pax[0].dob)),
                        ])
                    })
                    .collect(),
            ),
        ),
        ("membership", s(w.tier)),
        ("reservations", J::Arr(w.reservations.iter().map(|r| s(&r.id)).collect())),
    ])
}

fn policy(w: &World) -> String {
    fill_text(include_str!("texts/support_policy.md"), &[("date", &super::build::date(w.today))])
}

pub(super) fn generate(spec: Spec) -> Conversation {
    let Spec { mut rng, target, mut finish } = spec;
    let first = *rng.pick(FIRST);
    let last = *rng.pick(LAST);
    let hub = *rng.pick(HUBS);
    fn metro(city: &str) -> &str {
        if city == "Newark" {
            "New York"
        } else {
            city
        }
    }
    let mut dests: Vec<(&str, &str)> = AIRPORTS.iter().copied().filter(|a| metro(a.1) != hub.1).collect();
    rng.shuffle(&mut dests);
    let offsite = dests[0];
    let today = super::build::days_from_civil(2024, 4 + rng.range(0, 5) as u32, 1 + rng.range(0, 20) as u32);
    let mut w = World {
        first,
        last,
        user_id: format!("{}_{}_{}", first.to_lowercase(), last.to_lowercase(), rng.digits(4)),
        email: format!("{}.{}{}@example.com", first.to_lowercase(), last.to_lowercase(), rng.digits(2)),
        tier: rng.pick_str(&["regular", "silver", "gold"]),
        card: (format!("credit_card_{}", rng.digits(7)), rng.digits(4)),
        card2: (format!("credit_card_{}", rng.digits(7)), rng.digits(4)),
        gift: (format!("gift_card_{}", rng.digits(7)), rng.range(40, 300) as i64),
        cert: (format!("certificate_{}", rng.digits(7)), 50 * rng.range(2, 8) as i64),
        reservations: Vec::new(),
        hub,
        offsite_day: today + rng.range(6, 20) as i64,
        today,
    };
    // The team: reservations from the hub and elsewhere to the offsite city.
    let n_res = ((target / 6_000) as usize + 6).clamp(10, 40);
    let mut used: Vec<(&str, &str)> = Vec::new();
    for i in 0..n_res {
        let origin = if i % 3 == 0 { dests[1 + rng.below(dests.len() - 1)].0 } else { hub.0 };
        let n_pax = rng.between(1, 3);
        let mut pax = Vec::new();
        for _ in 0..n_pax {
            let mut name = (*rng.pick(FIRST), *rng.pick(LAST));
            let mut tries = 0;
            while used.contains(&name) && tries < 20 {
                name = (*rng.pick(FIRST), *rng.pick(LAST));
                tries += 1;
            }
            used.push(name);
            let dob = super::build::date(super::build::days_from_civil(
                1965 + rng.range(0, 35) as i64,
                1 + rng.range(0, 11) as u32,
                1 + rng.range(0, 27) as u32,
            ));
            pax.push(Pax { first: name.0, last: name.1, dob });
        }
        let r = w.reservation(&mut rng, origin, offsite.0, pax);
        w.reservations.push(r);
    }
    let mut b = Builder::new(rng.fork(), IdStyle::OpenAi);
    b.system(policy(&w));

    let open = b.user(format!(
        "Hi! I'm coordinating travel for my company's team offsite in {} ({}) on {}. I have a bunch of reservations to sort out: some flight changes, extra bags, maybe a cancellation, and a booking for a new colleague. Can you help me go through them one by one?",
        offsite.1,
        offsite.0,
        super::build::date(w.offsite_day)
    ));
    b.probe(
        ProbeKind::Task,
        "offsite-travel",
        q(
            "What is the user trying to get done in this conversation?",
            format!("Sort out the team's reservations for the offsite in {} on {}: flight changes, bags, a cancellation and a new booking.", offsite.1, super::build::date(w.offsite_day)),
            &[&[offsite.1, offsite.0], &["offsite"]],
        ),
        open,
    );
    b.assistant("I'd be happy to help. To get started, could you please provide your user ID?");
    let uid = b.user(format!("Sure, it's {}.", w.user_id));
    b.probe(ProbeKind::Recall, "user-id", q("What is the user's user ID?", w.user_id.clone(), &[&[&w.user_id]]), uid);
    let prof = b
        .tool("", Call::ok("get_user_details", obj(vec![("user_id", s(&w.user_id))]).spaced(), user_json(&w).spaced()));
    b.probe(
        ProbeKind::Recall,
        "certificate",
        q(
            "Which travel certificate is in the user's profile, and for how much?",
            format!("{} for ${}.", w.cert.0, w.cert.1),
            &[&[&w.cert.0]],
        ),
        prof.results[0],
    );
    b.assistant(format!(
        "Thank you, {}. I can see your profile ({} member) with {} reservations. Which reservation would you like to start with?",
        w.first,
        w.tier,
        w.reservations.len()
    ));

    let mut ri = 0usize;
    let mut issue = 0usize;
    let mut cancelled: Vec<String> = Vec::new();
    while b.tokens() + 3_000 < target {
        let kind = if issue < 6 {
            [0, 3, 2, 5, 1, 4][issue]
        } else {
            match rng.below(20) {
                0..=6 => 0,
                7..=10 => 5,
                11..=13 => 1,
                14..=15 => 2,
                16..=17 => 3,
                _ => 4,
            }
        };
        issue += 1;
        // The next reservation that is still active, going round the list.
        while cancelled.contains(&w.reservations[ri % w.reservations.len()].id) {
            ri += 1;
        }
        let at = ri % w.reservations.len();
        let decide = b.count_probes(ProbeKind::Decision) < 5;
        let artifact = b.count_probes(ProbeKind::Artifact) < 4;
        match kind {
            0 => change_flight(&mut rng, &mut b, &mut w, at, decide, artifact),
            1 => add_bags(&mut rng, &mut b, &mut w, at),
            2 if w.reservations.len() > cancelled.len() + 3 => {
                if cancel(&mut rng, &mut b, &mut w, at, decide) {
                    cancelled.push(w.reservations[at].id.clone());
                }
            }
            3 => book_new(&mut rng, &mut b, &mut w, offsite.0, decide, artifact),
            2 | 4 => complaint(&mut rng, &mut b, &mut w, at),
            _ => find(&mut rng, &mut b, &mut w, at),
        }
        if kind != 3 {
            ri += 1;
        }
    }

    // What comes next.
    while cancelled.contains(&w.reservations[ri % w.reservations.len()].id) {
        ri += 1;
    }
    let r = w.reservations[ri % w.reservations.len()].clone();
    let who = format!("{} {}", r.pax[0].first, r.pax[0].last);
    let ask = b.user(format!(
        "Last thing for today: on reservation {} I still need to add 2 checked bags for {who}. Let's do that next, and pay with the card ending in {}.",
        r.id, w.card.1
    ));
    b.probe(
        ProbeKind::Continuation,
        "add-bags-next",
        q(
            "What does the user want done next?",
            format!("Add 2 checked bags for {who} on reservation {}, paid with the card ending in {}.", r.id, w.card.1),
            &[&[&r.id], &[&who, r.pax[0].last], &[&w.card.1]],
        ),
        ask,
    );
    b.tool(
        "",
        Call::ok(
            "get_reservation_details",
            obj(vec![("reservation_id", s(&r.id))]).spaced(),
            reservation_json(&r, &w.user_id).spaced(),
        ),
    );
    finish.scenario =
        format!("{} ({} member): {} reservations, {} issues", w.user_id, w.tier, w.reservations.len(), issue);
    finish.model = Some("gpt-4o");
    b.finish(finish)
}

fn lookup(b: &mut Builder, w: &World, ri: usize) -> usize {
    let r = &w.reservations[ri];
    b.tool(
        "",
        Call::ok(
            "get_reservation_details",
            obj(vec![("reservation_id", s(&r.id))]).spaced(),
            reservation_json(r, &w.user_id).spaced(),
        ),
    )
    .results[0]
}

fn change_flight(rng: &mut Rng, b: &mut Builder, w: &mut World, ri: usize, probe: bool, artifact: bool) {
    let r = w.reservations[ri].clone();
    b.user(format!(
        "Reservation {} for {} {}: they can't make the {} flight anymore, can we move them to a later one the same day?",
        r.id, r.pax[0].first, r.pax[0].last, r.flights[0].number
    ));
    lookup(b, w, ri);
    if r.cabin == Cabin::Basic {
        let m = b.assistant(format!(
            "I'm sorry, but reservation {} is in basic economy, and basic economy flights cannot be modified under our policy. I can change the cabin for all flights (you would pay the difference), after which a flight change would be possible. Would you like to do that?",
            r.id
        ));
        if probe {
            b.probe(
                ProbeKind::Decision,
                &format!("no-change-{}", r.id),
                q(
                    format!("Why could the flight on reservation {} not be changed directly?", r.id),
                    "It is basic economy, which cannot be modified; only a cabin change was offered.".to_string(),
                    &[&[&r.id], &["basic economy"]],
                ),
                m,
            );
        }
        b.user("No, leave it as it is then. They'll take the original flight.");
        b.assistant("Understood, reservation ".to_string() + &r.id + " stays unchanged.");
        return;
    }
    // Search, twice sometimes (direct then one-stop), reusing the call id as recorded agents do.
    let day = r.flights[0].date.clone();
    let d = r.flights[0].day;
    let n = rng.between(3, 6);
    let direct: Vec<Flight> = (0..n).map(|_| w.flight(rng, r.origin, r.dest, d)).collect();
    b.tool(
        "",
        Call::ok(
            "search_direct_flight",
            obj(vec![("origin", s(r.origin)), ("destination", s(r.dest)), ("date", s(&day))]).spaced(),
            J::Arr(direct.iter().map(|f| search_json(rng, f)).collect()).spaced(),
        ),
    );
    if rng.chance(75) {
        let hubs = ["ATL", "ORD", "DFW", "DEN", "CLT"];
        let k = rng.between(8, 20);
        let legs: Vec<J> = (0..k)
            .map(|_| {
                let via = *rng.pick(&hubs);
                let a = w.flight(rng, r.origin, via, d);
                let mut c = w.flight(rng, via, r.dest, d);
                c.dep = a.arr + 60;
                c.arr = c.dep + 150;
                J::Arr(vec![search_json(rng, &a), search_json(rng, &c)])
            })
            .collect();
        b.tool_reusing_id(
            "",
            Call::ok(
                "search_onestop_flight",
                obj(vec![("origin", s(r.origin)), ("destination", s(r.dest)), ("date", s(&day))]).spaced(),
                J::Arr(legs).spaced(),
            ),
        );
    }
    let mut options = direct.clone();
    options.sort_by_key(|f| f.dep);
    let listing = options
        .iter()
        .enumerate()
        .map(|(i, f)| {
            format!(
                "{}. **{}**: departs {} EST, arrives {} EST, {} ${}",
                i + 1,
                f.number,
                &hhmm(f.dep)[..5],
                &hhmm(f.arr)[..5],
                r.cabin.words(),
                r.cabin.fare(f)
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    b.assistant(format!(
        "Here are the direct flights from {} to {} on {}:\n\n{listing}\n\nWhich one would you like?",
        r.origin, r.dest, day
    ));
    let chosen = options[options.len() - 1].clone();
    let rejected = options[0].clone();
    let pick =
        b.user(format!("The {} one, please. Not {}, that's way too early for them.", chosen.number, rejected.number));
    if probe {
        b.probe(
            ProbeKind::Decision,
            &format!("flight-{}", r.id),
            q(
                format!("Which flight did the user choose for reservation {}, and which did they reject?", r.id),
                format!("{} chosen; {} rejected as too early.", chosen.number, rejected.number),
                &[&[&chosen.number], &[&rejected.number]],
            ),
            pick,
        );
    }
    let diff = (r.cabin.fare(&chosen) - r.cabin.fare(&r.flights[0])) * r.pax.len() as i64;
    b.assistant(format!(
        "To confirm, I will change reservation {} from {} to {} on {} ({} cabin, {} passenger(s)). The fare difference is ${} {} your card ending in {}. Do you confirm (yes)?",
        r.id,
        r.flights[0].number,
        chosen.number,
        day,
        r.cabin.words(),
        r.pax.len(),
        diff.abs(),
        if diff >= 0 { "charged to" } else { "refunded to" },
        w.card.1
    ));
    b.user("yes");
    let mut updated = r.clone();
    updated.flights[0] = chosen.clone();
    let res = b.tool(
        "",
        Call::ok(
            "update_reservation_flights",
            obj(vec![
                ("reservation_id", s(&r.id)),
                ("cabin", s(r.cabin.key())),
                (
                    "flights",
                    J::Arr(
                        updated
                            .flights
                            .iter()
                            .map(|f| obj(vec![("flight_number", s(&f.number)), ("date", s(&f.date))]))
                            .collect(),
                    ),
                ),
                ("payment_id", s(&w.card.0)),
            ])
            .spaced(),
            reservation_json(&updated, &w.user_id).spaced(),
        ),
    );
    if artifact {
        b.probe(
            ProbeKind::Artifact,
            &format!("changed-{}", r.id),
            q(
                format!("What was changed on reservation {}?", r.id),
                format!("The outbound flight moved from {} to {}.", r.flights[0].number, chosen.number),
                &[&[&r.id], &[&chosen.number]],
            ),
            res.results[0],
        );
    }
    w.reservations[ri] = updated;
    b.assistant(format!(
        "Done: reservation {} is now on {} ({}). The difference goes to your card ending in {}.",
        r.id, chosen.number, day, w.card.1
    ));
}

fn free_bags(tier: &str, cabin: Cabin) -> u64 {
    match (tier, cabin) {
        ("gold", Cabin::Basic) => 2,
        ("gold", _) => 3,
        ("silver", Cabin::Basic) => 1,
        ("silver", Cabin::Economy) => 2,
        ("silver", Cabin::Business) => 3,
        (_, Cabin::Basic) => 0,
        (_, Cabin::Economy) => 1,
        (_, Cabin::Business) => 2,
    }
}

fn add_bags(rng: &mut Rng, b: &mut Builder, w: &mut World, ri: usize) {
    let r = w.reservations[ri].clone();
    let add = rng.range(1, 3);
    b.user(format!("For {}, please add {add} checked bag(s) in total for the group.", r.id));
    lookup(b, w, ri);
    let free = free_bags(w.tier, r.cabin) * r.pax.len() as u64;
    let total = r.bags + add;
    let nonfree = total.saturating_sub(free);
    b.tool(
        "",
        Call::ok(
            "calculate",
            obj(vec![("expression", s(format!("{nonfree} * 50")))]).spaced(),
            (nonfree * 50).to_string(),
        ),
    );
    b.assistant(format!(
        "As a {} member in {}, each passenger gets {} free checked bag(s), so {} bags are free for this reservation. Going from {} to {total} bags means {nonfree} paid bag(s) at $50 each, ${} in total, charged to your card ending in {}. Do you confirm (yes)?",
        w.tier,
        r.cabin.words(),
        free_bags(w.tier, r.cabin),
        free,
        r.bags,
        nonfree * 50,
        w.card.1
    ));
    b.user("yes");
    let mut updated = r.clone();
    updated.bags = total;
    updated.nonfree = nonfree;
    b.tool(
        "",
        Call::ok(
            "update_reservation_baggages",
            obj(vec![
                ("reservation_id", s(&r.id)),
                ("total_baggages", int(total as i64)),
                ("nonfree_baggages", int(nonfree as i64)),
                ("payment_id", s(&w.card.0)),
            ])
            .spaced(),
            reservation_json(&updated, &w.user_id).spaced(),
        ),
    );
    w.reservations[ri] = updated;
    b.assistant(format!("Done: reservation {} now has {total} checked bags ({nonfree} paid).", r.id));
}

/// True when the reservation was cancelled.
fn cancel(rng: &mut Rng, b: &mut Builder, w: &mut World, ri: usize, probe: bool) -> bool {
    let r = w.reservations[ri].clone();
    let reason = *rng.pick(&["change of plan", "change of plan", "other reasons"]);
    b.user(format!(
        "{} {} won't come after all ({reason}). Please cancel reservation {}.",
        r.pax[0].first, r.pax[0].last, r.id
    ));
    lookup(b, w, ri);
    let allowed = r.cabin == Cabin::Business || (r.insurance && reason != "change of plan");
    if !allowed {
        let why = if r.cabin == Cabin::Business {
            String::new()
        } else if r.insurance {
            "the insurance only covers health or weather reasons".to_string()
        } else {
            format!("it is {} without travel insurance", r.cabin.words())
        };
        let m = b.assistant(format!(
            "I'm sorry, I can't cancel reservation {}: it was booked more than 24 hours ago, the flights were not cancelled by the airline, and {why}. Under our policy it cannot be cancelled for a refund. The passengers can still change their details, and I can change the cabin if that helps.",
            r.id
        ));
        if probe {
            b.probe(
                ProbeKind::Decision,
                &format!("no-cancel-{}", r.id),
                q(
                    format!("Was reservation {} cancelled? Why or why not?", r.id),
                    format!("No: booked more than 24 hours ago and {why}."),
                    &[&[&r.id], &["24 hours"]],
                ),
                m,
            );
        }
        b.user("That's frustrating, but OK. Leave it then.");
        b.assistant(format!("Understood, reservation {} stays as it is. What's next on your list?", r.id));
        return false;
    }
    b.assistant(format!(
        "Reservation {} ({}, {}) can be cancelled. The refund of the fare goes back to the original payment method within 5 to 7 business days. Do you confirm the cancellation (yes)?",
        r.id,
        r.cabin.words(),
        if r.insurance { "with insurance" } else { "business cabin" }
    ));
    b.user("yes");
    b.tool(
        "",
        Call::ok(
            "cancel_reservation",
            obj(vec![("reservation_id", s(&r.id))]).spaced(),
            obj(vec![
                ("reservation_id", s(&r.id)),
                ("status", s("cancelled")),
                ("refund", obj(vec![("payment_id", s(&r.payment)), ("amount", money(100 * r.total()))])),
            ])
            .spaced(),
        ),
    );
    b.assistant(format!(
        "Reservation {} is cancelled. The refund will reach the original payment method in 5 to 7 business days.",
        r.id
    ));
    true
}

fn book_new(rng: &mut Rng, b: &mut Builder, w: &mut World, dest: &'static str, probe: bool, artifact: bool) {
    let first = *rng.pick(FIRST);
    let last = *rng.pick(LAST);
    let dob = super::build::date(super::build::days_from_civil(
        1990 + rng.range(0, 10) as i64,
        1 + rng.range(0, 11) as u32,
        1 + rng.range(0, 27) as u32,
    ));
    b.user(format!("We have a new colleague joining: {first} {last}, born {dob}. Can you book a one-way economy ticket from {} to {dest} on {}?", w.hub.0, super::build::date(w.offsite_day)));
    let n = rng.between(3, 6);
    let opts: Vec<Flight> = (0..n).map(|_| w.flight(rng, w.hub.0, dest, w.offsite_day)).collect();
    b.tool(
        "",
        Call::ok(
            "search_direct_flight",
            obj(vec![("origin", s(w.hub.0)), ("destination", s(dest)), ("date", s(super::build::date(w.offsite_day)))])
                .spaced(),
            J::Arr(opts.iter().map(|f| search_json(rng, f)).collect()).spaced(),
        ),
    );
    let f = opts[rng.below(opts.len())].clone();
    b.assistant(format!(
        "The best fit is {} departing {} EST at ${} in economy. Would you like travel insurance ($30)? And for payment, you have {} (${}) and your cards ending in {} and {}.",
        f.number,
        &hhmm(f.dep)[..5],
        Cabin::Economy.fare(&f),
        w.cert.0,
        w.cert.1,
        w.card.1,
        w.card2.1
    ));
    let pay = b
        .user(format!("No insurance. Use the certificate first and put the rest on the card ending in {}.", w.card2.1));
    if probe {
        b.probe(
            ProbeKind::Decision,
            "new-booking-payment",
            q(
                format!("How did the user want {first} {last}'s booking paid, and did they want insurance?"),
                format!("Certificate first, rest on the card ending in {}; no insurance.", w.card2.1),
                &[&["certificate"], &[&w.card2.1], &["No insurance"]],
            ),
            pay,
        );
    }
    b.assistant(format!(
        "To confirm: one-way {} {} -> {} on {} in economy for {first} {last} (born {dob}), no insurance, paid with {} and the card ending in {}. Do you confirm (yes)?",
        f.number,
        w.hub.0,
        dest,
        f.date,
        w.cert.0,
        w.card2.1
    ));
    b.user("yes");
    let mut r = w.reservation(rng, w.hub.0, dest, vec![Pax { first, last, dob }]);
    r.round_trip = false;
    r.flights = vec![f.clone()];
    r.cabin = Cabin::Economy;
    r.insurance = false;
    r.bags = 0;
    r.payment = w.cert.0.clone();
    r.rest_on = Some(w.card2.0.clone());
    r.first_amount = w.cert.1;
    r.created = format!("{}T09:{:02}:{:02}", super::build::date(w.today), rng.range(5, 59), rng.range(0, 59));
    let res = b.tool(
        "",
        Call::ok(
            "book_reservation",
            obj(vec![
                ("user_id", s(&w.user_id)),
                ("origin", s(w.hub.0)),
                ("destination", s(dest)),
                ("flight_type", s("one_way")),
                ("cabin", s("economy")),
                ("flights", J::Arr(vec![obj(vec![("flight_number", s(&f.number)), ("date", s(&f.date))])])),
                (
                    "passengers",
                    J::Arr(vec![obj(vec![
                        ("first_name", s(first)),
                        ("last_name", s(last)),
                        ("dob", s(&r.pax[0].dob)),
                    ])]),
                ),
                (
                    "payment_methods",
                    J::Arr(
                        r.paid()
                            .into_iter()
                            .map(|(id, amount)| obj(vec![("payment_id", s(id)), ("amount", int(amount))]))
                            .collect(),
                    ),
                ),
                ("total_baggages", int(0)),
                ("nonfree_baggages", int(0)),
                ("insurance", s("no")),
            ])
            .spaced(),
            reservation_json(&r, &w.user_id).spaced(),
        ),
    );
    if artifact {
        b.probe(
            ProbeKind::Artifact,
            "new-reservation",
            q(
                format!("What is the reservation id of the booking made for {first} {last}?"),
                format!("{} ({} on {}).", r.id, f.number, f.date),
                &[&[&r.id], &[&f.number]],
            ),
            res.results[0],
        );
    }
    b.assistant(format!("Booked: reservation {} for {first} {last} on {} ({}).", r.id, f.number, f.date));
    w.reservations.push(r);
}

fn complaint(rng: &mut Rng, b: &mut Builder, w: &mut World, ri: usize) {
    let r = w.reservations[ri].clone();
    b.user(format!(
        "Also, {} {}'s last trip with you on {} was delayed by {} hours and they missed a client dinner. I'd like some compensation for that.",
        r.pax[0].first,
        r.pax[0].last,
        r.id,
        rng.range(2, 6)
    ));
    lookup(b, w, ri);
    let eligible = w.tier != "regular" || r.insurance || r.cabin == Cabin::Business;
    if eligible {
        let amount = 50 * r.pax.len() as i64;
        b.assistant(format!(
            "I'm sorry about the delay. Since {}, I can offer a travel certificate of ${amount} ($50 per passenger) as a gesture, once the reservation has been changed or cancelled, which we did not do here. Would you still like to proceed with changing it so that I can issue it?",
            if w.tier != "regular" { format!("you are a {} member", w.tier) } else if r.insurance { "the reservation has travel insurance".to_string() } else { "the reservation is in business".to_string() }
        ));
        b.user("No, no changes needed. Never mind then.");
        b.assistant("Understood. What's next on your list?");
    } else {
        b.assistant(format!(
            "I'm sorry about the delay. Unfortunately, as a regular member without travel insurance flying {}, reservation {} is not eligible for compensation under our policy.",
            r.cabin.words(),
            r.id
        ));
        b.user("OK, I understand.");
        b.assistant("Thank you for understanding. What's next on your list?");
    }
}

/// The user does not know the reservation id; the agent looks through the profile's
/// reservations one by one until it finds the passenger.
fn find(rng: &mut Rng, b: &mut Builder, w: &mut World, ri: usize) {
    let target = w.reservations[ri].clone();
    let who = format!("{} {}", target.pax[0].first, target.pax[0].last);
    b.user(format!(
        "I don't have the reservation number for {who}. Can you find it? I need to know which flight they're on."
    ));
    // Look at a few others first, as an agent without a search tool must.
    let mut order: Vec<usize> = (0..w.reservations.len()).filter(|&i| i != ri).collect();
    rng.shuffle(&mut order);
    order.truncate(rng.between(2, 6));
    order.push(ri);
    for i in order {
        lookup(b, w, i);
    }
    let f = &target.flights[0];
    b.assistant(format!(
        "Found it: {who} is on reservation {}, flight {} from {} to {} on {}, departing {} EST ({}).",
        target.id,
        f.number,
        f.origin,
        f.dest,
        f.date,
        &hhmm(f.dep)[..5],
        target.cabin.words()
    ));
}
