//! `cms`: a CMS site-builder agent (the domain of seed 004) building a small business site.
//!
//! The user gives a brief with design preferences and dislikes; the agent reads the section
//! definitions and the page list (large JSON), creates pages, adds sections, searches images,
//! reads whole pages back (pretty JSON that grows with every section), takes the user's
//! feedback, offers options the user picks from or rejects, updates sections (sometimes
//! failing validation first), changes the theme, writes blog posts, and ends with the next
//! request.
//!
//! Planted facts: the brief (business, pages, palette, fonts, the hero layout the user does
//! not want) in message 1, page and section ids in tool results (an id with and without its
//! `pg_`/`sec_` prefix, a slug with and without its leading `/`), a limit from the section
//! definitions, the image chosen for a hero, every option chosen or rejected, and the next
//! steps at the end.

use compaction::{Conversation, ProbeKind};

use super::build::{capitalize, fill_text, int, obj, q, s, Builder, Call, IdStyle, J};
use super::rng::Rng;
use super::Spec;

struct Business {
    name: &'static str,
    kind: &'static str,
    city: &'static str,
    since: u32,
    services: &'static [&'static str],
    /// The page listing the offer (`menu`, `services`, `classes`, ...).
    offer_page: &'static str,
    audience: &'static str,
}

const BUSINESSES: &[Business] = &[
    Business {
        name: "Harbor & Pine Bakery",
        kind: "neighbourhood bakery",
        city: "Portland",
        since: 2011,
        services: &[
            "sourdough loaves",
            "morning pastries",
            "celebration cakes",
            "wholesale for cafés",
            "weekend baking classes",
        ],
        offer_page: "menu",
        audience: "locals and cafés",
    },
    Business {
        name: "Kestrel Legal",
        kind: "law firm",
        city: "Leeds",
        since: 2004,
        services: &[
            "employment law",
            "commercial contracts",
            "immigration advice",
            "dispute resolution",
            "data protection",
        ],
        offer_page: "services",
        audience: "small businesses and their staff",
    },
    Business {
        name: "Northwind Yoga",
        kind: "yoga studio",
        city: "Boulder",
        since: 2016,
        services: &["vinyasa flow", "yin yoga", "prenatal classes", "teacher training", "corporate sessions"],
        offer_page: "classes",
        audience: "beginners and seasoned practitioners",
    },
    Business {
        name: "Fieldnote Analytics",
        kind: "B2B analytics platform",
        city: "Berlin",
        since: 2019,
        services: &[
            "self-serve dashboards",
            "warehouse connectors",
            "anomaly alerts",
            "embedded analytics",
            "SOC 2 reporting",
        ],
        offer_page: "product",
        audience: "data teams at growing SaaS companies",
    },
    Business {
        name: "Atelier Moraine",
        kind: "architecture studio",
        city: "Lyon",
        since: 2009,
        services: &[
            "residential design",
            "renovations",
            "interior architecture",
            "planning permits",
            "timber extensions",
        ],
        offer_page: "projects",
        audience: "homeowners and small developers",
    },
];

const PALETTES: &[(&str, &str, &str, &str)] = &[
    ("deep green", "#2F4A3A", "cream", "#F5EFE6"),
    ("navy", "#1B2A41", "sand", "#E9DCC9"),
    ("terracotta", "#B5543A", "off-white", "#FAF7F2"),
    ("charcoal", "#2B2B2B", "sage", "#C9D5C0"),
    ("plum", "#4B2142", "blush", "#F3E1E4"),
    ("teal", "#11575C", "warm grey", "#E4E1DC"),
];

const FONTS: &[&str] = &["Playfair Display", "Fraunces", "DM Serif Display", "Cormorant Garamond", "Libre Baskerville"];
const BODY_FONTS: &[&str] = &["Inter", "Source Sans 3", "Work Sans", "Nunito Sans", "IBM Plex Sans"];
const DISLIKES: &[(&str, &str)] = &[
    ("carousel", "no carousel or slider in the hero, they feel dated"),
    ("parallax", "no parallax scrolling effects"),
    ("stock photos of people", "no stock photos of people, only our own photos or objects"),
    ("gradient", "no gradient backgrounds, flat colours only"),
    ("autoplay video", "no autoplay video anywhere"),
];

const SECTION_TYPES: &[&str] = &[
    "hero",
    "features",
    "testimonials",
    "pricing_table",
    "cta",
    "gallery",
    "faq",
    "team_grid",
    "contact_form",
    "rich_text",
    "stats",
    "logo_cloud",
];

struct Page {
    id: String,
    title: String,
    slug: String,
    sections: Vec<Section>,
    status: &'static str,
}

#[derive(Clone)]
struct Section {
    id: String,
    kind: &'static str,
    content: J,
}

struct World {
    biz: &'static Business,
    primary: (&'static str, &'static str),
    secondary: (&'static str, &'static str),
    heading_font: &'static str,
    body_font: &'static str,
    rejected_body_font: &'static str,
    pages: Vec<Page>,
    image_seq: u64,
    /// Offers made so far, in `offer_order`.
    offered: usize,
    offer_order: Vec<usize>,
    site_id: String,
    day0: i64,
    clock: i64,
}

impl World {
    fn now(&mut self, rng: &mut Rng) -> String {
        self.clock += rng.range(20, 400) as i64;
        super::build::timestamp(self.day0 * 86_400 + self.clock)
    }
}

const SENTENCES: &[&str] = &[
    "{name} has been part of {city} since {since}.",
    "We focus on {s1} and {s2}, and we do both properly.",
    "Every project starts with a conversation, not a quote.",
    "Our team works with {audience} across {city} and beyond.",
    "Book a first meeting online; it takes two minutes and costs nothing.",
    "From {s1} to {s2}, you deal with the same small team from start to finish.",
    "We publish our prices, because surprises belong at birthdays, not on invoices.",
    "Clients come back for {s1}, and stay for {s2}.",
    "Questions about {s1}? We answer every message within one working day.",
    "We are a {kind} in {city}, independent and proud of it.",
    "Nothing leaves our hands until we would be happy to put our own name on it.",
    "Our {s1} is what people ask about first, and it is where we started.",
    "We keep our list of {s1} clients small on purpose, so each one gets real attention.",
    "If {s2} is new to you, start with a short call and we will explain the options plainly.",
    "Most of our work comes from recommendations, which tells you more than any slogan.",
    "We run {s1} the way we would want it run for ourselves.",
    "You will always know who is working on your {s2}, and how to reach them.",
    "Opening hours, prices and directions are on the contact page, and they are up to date.",
];

fn sentence(w: &World, t: &str, s1: &str, s2: &str) -> String {
    let b = w.biz;
    t.replace("{name}", b.name)
        .replace("{city}", b.city)
        .replace("{since}", &b.since.to_string())
        .replace("{s1}", s1)
        .replace("{s2}", s2)
        .replace("{audience}", b.audience)
        .replace("{kind}", b.kind)
}

/// `n` different sentences.
fn para(rng: &mut Rng, w: &World, n: usize) -> String {
    let picked = rng.sample(SENTENCES, n);
    picked
        .iter()
        .map(|t| {
            let two = rng.sample(w.biz.services, 2);
            sentence(w, t, two[0], two[1])
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn headline(rng: &mut Rng, w: &World) -> String {
    let b = w.biz;
    let s1 = *rng.pick(b.services);
    rng.pick(&[
        format!("{} in {}, done properly", capitalize(s1), b.city),
        format!("Welcome to {}", b.name),
        format!("{} for {}", capitalize(s1), b.audience),
        format!("Made in {} since {}", b.city, b.since),
        format!("Everything you need for {s1}"),
    ])
    .clone()
}

impl World {
    fn image(&mut self, rng: &mut Rng, topic: &str) -> J {
        self.image_seq += rng.range(1, 40);
        let id = format!("img_{:06}", self.image_seq);
        let w = 400 * rng.range(3, 8);
        let h = w * rng.range(5, 9) / 8;
        obj(vec![
            ("id", s(&id)),
            ("url", s(format!("https://cdn.sitekit.io/{}/images/{id}.jpg", self.site_id))),
            ("alt", s(format!("{} at {}", capitalize(topic), self.biz.name))),
            ("width", int(w as i64)),
            ("height", int(h as i64)),
            (
                "focalPoint",
                obj(vec![
                    ("x", J::Num(format!("0.{}", rng.range(30, 70)))),
                    ("y", J::Num(format!("0.{}", rng.range(30, 70)))),
                ]),
            ),
            (
                "tags",
                J::Arr(vec![s(topic), s(*rng.pick(&["interior", "detail", "team", "product", "exterior", "process"]))]),
            ),
            ("license", s(*rng.pick(&["owned", "owned", "unsplash"]))),
        ])
    }
}

fn section_content(rng: &mut Rng, w: &mut World, kind: &str) -> J {
    match kind {
        "hero" => {
            let img = w.image(rng, "storefront");
            obj(vec![
                ("layout", s(*rng.pick(&["split-left", "split-right", "centered", "full-bleed"]))),
                ("eyebrow", s(w.biz.kind)),
                ("headline", s(headline(rng, w))),
                ("subheadline", s(para(rng, w, 2))),
                ("primaryCta", obj(vec![("label", s("Get in touch")), ("url", s("/contact"))])),
                (
                    "secondaryCta",
                    obj(vec![
                        ("label", s(format!("See our {}", w.biz.offer_page))),
                        ("url", s(format!("/{}", w.biz.offer_page))),
                    ]),
                ),
                ("image", img),
                ("overlayOpacity", J::Num(format!("0.{}", rng.range(1, 5)))),
            ])
        }
        "features" | "stats" => {
            let n = rng.between(3, 6);
            let items = (0..n)
                .map(|_| {
                    let sv = *rng.pick(w.biz.services);
                    obj(vec![
                        (
                            "icon",
                            s(*rng.pick(&[
                                "leaf",
                                "clock",
                                "shield",
                                "star",
                                "map-pin",
                                "heart",
                                "sparkles",
                                "check-circle",
                            ])),
                        ),
                        ("title", s(capitalize(sv))),
                        ("body", s(para(rng, w, 2))),
                        (
                            "link",
                            obj(vec![
                                ("label", s("Learn more")),
                                ("url", s(format!("/{}#{}", w.biz.offer_page, sv.replace(' ', "-")))),
                            ]),
                        ),
                    ])
                })
                .collect();
            obj(vec![
                ("heading", s(headline(rng, w))),
                ("intro", s(para(rng, w, 1))),
                ("columns", int(3)),
                ("items", J::Arr(items)),
            ])
        }
        "testimonials" => {
            let names = ["Maya R.", "Tom H.", "Aisha K.", "Jonas W.", "Priya N.", "Luca B.", "Sofia M.", "Dan O."];
            let n = rng.between(3, 5);
            let items = (0..n)
                .map(|_| {
                    obj(vec![
                        ("quote", s(para(rng, w, 2))),
                        ("author", s(*rng.pick(&names))),
                        (
                            "role",
                            s(*rng.pick(&["Customer since 2019", "Regular", "Client", "Business owner", "Student"])),
                        ),
                        ("rating", int(rng.range(4, 5) as i64)),
                    ])
                })
                .collect();
            obj(vec![("heading", s("What people say")), ("style", s("cards")), ("items", J::Arr(items))])
        }
        "pricing_table" => {
            let tiers = ["Starter", "Standard", "Premium"];
            let items = tiers
                .iter()
                .map(|t| {
                    let price = rng.range(2, 40) * 500;
                    obj(vec![
                        ("name", s(*t)),
                        (
                            "price",
                            obj(vec![
                                ("amount", super::build::money(price as i64)),
                                ("currency", s("EUR")),
                                ("period", s("month")),
                            ]),
                        ),
                        ("features", J::Arr((0..4).map(|_| s(capitalize(rng.pick_str(w.biz.services)))).collect())),
                        ("highlighted", J::Bool(*t == "Standard")),
                        ("cta", obj(vec![("label", s("Choose")), ("url", s("/contact"))])),
                    ])
                })
                .collect();
            obj(vec![
                ("heading", s("Simple, published prices")),
                ("note", s(para(rng, w, 1))),
                ("tiers", J::Arr(items)),
            ])
        }
        "gallery" => {
            let n = rng.between(6, 12);
            let imgs = (0..n).map(|_| w.image(rng, "work")).collect();
            obj(vec![("heading", s("Recent work")), ("layout", s("masonry")), ("images", J::Arr(imgs))])
        }
        "faq" => {
            let n = rng.between(4, 7);
            let items = (0..n)
                .map(|_| {
                    let sv = *rng.pick(w.biz.services);
                    obj(vec![("question", s(format!("Do you offer {sv}?"))), ("answer", s(para(rng, w, 2)))])
                })
                .collect();
            obj(vec![("heading", s("Frequently asked questions")), ("items", J::Arr(items))])
        }
        "team_grid" => {
            let n = rng.between(3, 6);
            let first = ["Elena", "Marcus", "Hannah", "Idris", "Chloe", "Ravi", "Greta", "Owen"];
            let last = ["Novak", "Okafor", "Lindqvist", "Moreau", "Tanaka", "Byrne", "Castillo", "Weber"];
            let items = (0..n)
                .map(|_| {
                    let img = w.image(rng, "portrait");
                    obj(vec![
                        ("name", s(format!("{} {}", rng.pick(&first), rng.pick(&last)))),
                        ("role", s(capitalize(rng.pick_str(w.biz.services)) + " lead")),
                        ("bio", s(para(rng, w, 2))),
                        ("photo", img),
                    ])
                })
                .collect();
            obj(vec![("heading", s("The team")), ("members", J::Arr(items))])
        }
        "contact_form" => obj(vec![
            ("heading", s("Get in touch")),
            (
                "fields",
                J::Arr(
                    ["name", "email", "phone", "message"]
                        .iter()
                        .map(|f| obj(vec![("name", s(*f)), ("required", J::Bool(*f != "phone"))]))
                        .collect(),
                ),
            ),
            ("submitLabel", s("Send message")),
            ("recipient", s(format!("hello@{}.com", w.biz.name.to_lowercase().replace([' ', '&'], "")))),
            ("successMessage", s("Thanks! We reply within one working day.")),
        ]),
        "logo_cloud" => obj(vec![
            ("heading", s("Trusted by")),
            ("logos", J::Arr((0..rng.between(4, 8)).map(|_| w.image(rng, "logo")).collect())),
        ]),
        "cta" => obj(vec![
            ("headline", s(headline(rng, w))),
            ("body", s(para(rng, w, 1))),
            ("button", obj(vec![("label", s("Book a call")), ("url", s("/contact"))])),
            ("background", s("primary")),
        ]),
        _ => obj(vec![
            ("heading", s(headline(rng, w))),
            ("body", s((0..rng.between(2, 4)).map(|_| para(rng, w, 4)).collect::<Vec<_>>().join("\n\n"))),
        ]),
    }
}

fn definitions(rng: &mut Rng) -> J {
    let mut defs = Vec::new();
    for t in SECTION_TYPES {
        let max_items = rng.range(4, 8);
        let fields: Vec<J> = ["heading", "body", "items", "image", "cta", "background", "anchor", "visibility"]
            .iter()
            .take(rng.between(4, 8))
            .map(|f| {
                obj(vec![
                    ("name", s(*f)),
                    (
                        "type",
                        s(match *f {
                            "items" => "array",
                            "image" => "image",
                            "cta" => "link",
                            "visibility" => "enum",
                            _ => "string",
                        }),
                    ),
                    ("required", J::Bool(*f == "heading")),
                    (
                        "maxLength",
                        if *f == "heading" {
                            int(80)
                        } else if *f == "body" {
                            int(600)
                        } else {
                            J::Null
                        },
                    ),
                    ("description", s(format!("The {f} of the {} section.", t.replace('_', " ")))),
                ])
            })
            .collect();
        defs.push(obj(vec![
            ("type", s(*t)),
            ("label", s(capitalize(&t.replace('_', " ")))),
            ("maxItems", int(max_items as i64)),
            ("variants", J::Arr(vec![s("default"), s("compact"), s("inverted")])),
            ("fields", J::Arr(fields)),
        ]));
    }
    obj(vec![("version", s("2024-03")), ("definitions", J::Arr(defs))])
}

fn page_json(p: &Page, site: &str) -> J {
    obj(vec![
        ("id", s(&p.id)),
        ("siteId", s(site)),
        ("title", s(&p.title)),
        ("slug", s(&p.slug)),
        ("status", s(p.status)),
        (
            "seo",
            obj(vec![
                ("title", s(format!("{} | {}", p.title, site))),
                ("description", s(format!("{} page", p.title))),
                ("noindex", J::Bool(false)),
            ]),
        ),
        (
            "sections",
            J::Arr(
                p.sections
                    .iter()
                    .enumerate()
                    .map(|(i, x)| {
                        obj(vec![
                            ("id", s(&x.id)),
                            ("type", s(x.kind)),
                            ("order", int(i as i64)),
                            ("content", x.content.clone()),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}

fn system_prompt(w: &World) -> String {
    fill_text(include_str!("texts/cms_system.md"), &[("name", w.biz.name), ("site", &w.site_id)])
}

pub(super) fn generate(spec: Spec) -> Conversation {
    let Spec { mut rng, target, mut finish } = spec;
    let biz = rng.pick(BUSINESSES);
    let pal = *rng.pick(PALETTES);
    let fonts = rng.sample(FONTS, 2);
    let bodies = rng.sample(BODY_FONTS, 2);
    let dislike = *rng.pick(DISLIKES);
    let mut w = World {
        biz,
        primary: (pal.0, pal.1),
        secondary: (pal.2, pal.3),
        heading_font: fonts[0],
        body_font: bodies[0],
        rejected_body_font: bodies[1],
        pages: Vec::new(),
        image_seq: rng.range(100, 9000),
        offered: 0,
        offer_order: rng.sample(&(0..OFFERS.len()).collect::<Vec<_>>(), OFFERS.len()),
        site_id: format!("site_{}", rng.hex(8)),
        day0: super::build::days_from_civil(2024, 1 + rng.range(0, 10) as u32, 1 + rng.range(0, 27) as u32),
        clock: 9 * 3600,
    };
    let mut b = Builder::new(rng.fork(), IdStyle::OpenAi);
    b.system(system_prompt(&w));

    let offer = biz.offer_page;
    let plan = ["home", offer, "about", "contact"];
    let brief = format!(
        "Hi! I need a website for {name}, a {kind} in {city}. Pages: Home, {Offer}, About and Contact to start with, maybe a blog later. The audience is {aud}.\n\nLook and feel: calm and confident, lots of white space. Primary colour {p} ({ph}), background {sc} ({sh}). Headings in {hf}, body text in {bf}. Please, {dis}. Rounded buttons, not pills.\n\nFor the Home page I want a hero, a short intro about what we do, three or four highlights of our {s1} and {s2}, a few testimonials and a call to action at the bottom.",
        name = biz.name,
        kind = biz.kind,
        city = biz.city,
        Offer = capitalize(offer),
        aud = biz.audience,
        p = w.primary.0,
        ph = w.primary.1,
        sc = w.secondary.0,
        sh = w.secondary.1,
        hf = w.heading_font,
        bf = w.body_font,
        dis = dislike.1,
        s1 = biz.services[0],
        s2 = biz.services[1],
    );
    let brief_i = b.user(brief);
    b.probe(
        ProbeKind::Task,
        "build-site",
        q(
            "What did the user ask the assistant to build?",
            format!(
                "A website for {}, a {} in {}, with Home, {}, About and Contact pages.",
                biz.name,
                biz.kind,
                biz.city,
                capitalize(offer)
            ),
            &[&[biz.name], &[biz.city]],
        ),
        brief_i,
    );
    b.probe(
        ProbeKind::Recall,
        "primary-colour",
        q(
            "What primary colour did the user ask for?",
            format!("{} ({}).", w.primary.0, w.primary.1),
            &[&[w.primary.1, w.primary.0]],
        ),
        brief_i,
    );
    b.probe(
        ProbeKind::Decision,
        "dislike",
        q("Which design element did the user rule out in the brief?", dislike.1.to_string(), &[&[dislike.0]]),
        brief_i,
    );

    // Orientation.
    let defs = definitions(&mut rng);
    let defs_text = defs.pretty();
    let features_max = match &defs {
        J::Obj(pairs) => pairs
            .iter()
            .find(|(k, _)| k == "definitions")
            .and_then(|(_, v)| match v {
                J::Arr(items) => items.iter().find_map(|d| match d {
                    J::Obj(f) if matches!(f.first(), Some((_, J::Str(t))) if t == "features") => {
                        f.iter().find_map(|(k, v)| match (k.as_str(), v) {
                            ("maxItems", J::Int(n)) => Some(*n),
                            _ => None,
                        })
                    }
                    _ => None,
                }),
                _ => None,
            })
            .unwrap_or(6),
        _ => 6,
    };
    let existing = Page {
        id: format!("pg_{}", rng.hex(8)),
        title: "Untitled home".to_string(),
        slug: "/".to_string(),
        sections: Vec::new(),
        status: "draft",
    };
    let list = J::Arr(vec![obj(vec![
        ("id", s(&existing.id)),
        ("title", s(&existing.title)),
        ("slug", s("/")),
        ("status", s("draft")),
        ("sectionCount", int(0)),
        ("updatedAt", s(w.now(&mut rng))),
    ])])
    .pretty();
    let r = b.tools(
        "Great brief, thank you. Let me check which section types the CMS offers and what's already on the site.",
        vec![Call::ok("cms_getSectionDefinitions", "{}", defs_text), Call::ok("cms_listPages", "{}", list)],
    );
    b.probe(
        ProbeKind::Recall,
        "features-max-items",
        q(
            "How many items does the CMS allow at most in a features section?",
            format!("{features_max}"),
            &[&["\"type\": \"features\""], &[&format!("\"maxItems\": {features_max}")]],
        ),
        r.results[0],
    );
    b.assistant(format!(
        "Here's my plan:\n1. Reuse the existing empty draft ({}) as Home instead of creating a second home page.\n2. Create {}, About and Contact as drafts.\n3. Apply your theme: {} {} on {} {}, {} for headings and {} for body text, rounded buttons.\n4. Build Home section by section, then show it to you before moving on.\nNothing gets published until you say so. Starting with the theme.",
        existing.id,
        capitalize(offer),
        w.primary.0,
        w.primary.1,
        w.secondary.0,
        w.secondary.1,
        w.heading_font,
        w.body_font
    ));
    w.pages.push(Page { title: "Home".to_string(), ..existing });
    let theme = obj(vec![
        (
            "colors",
            obj(vec![
                ("primary", s(w.primary.1)),
                ("background", s(w.secondary.1)),
                ("text", s("#1F1F1F")),
                ("muted", s("#6B6B6B")),
            ]),
        ),
        (
            "typography",
            obj(vec![
                ("headingFont", s(w.heading_font)),
                ("bodyFont", s(w.body_font)),
                ("baseSize", int(17)),
                ("scale", J::Num("1.25".into())),
            ]),
        ),
        ("buttons", obj(vec![("radius", int(8)), ("style", s("solid"))])),
    ]);
    let mut applied = theme.clone();
    if let J::Obj(p) = &mut applied {
        p.push(("updatedAt".to_string(), s(w.now(&mut rng))));
        p.push(("siteId".to_string(), s(&w.site_id)));
    }
    b.tool("", Call::ok("cms_updateTheme", obj(vec![("theme", theme)]).compact(), applied.pretty()));

    // Pages and sections until the target.
    let mut page_i = 0usize;
    let mut round = 0usize;
    let mut reviews = 0usize;
    let mut posts = 0usize;
    let mut section_probes = 0usize;
    let mut font_asked = false;
    let extras = rng.sample(&["pricing", "faq", "team", "careers", "gallery", "reviews", "partners"], 7);
    let mut extra_i = 0usize;
    while b.tokens() + 6_000 < target {
        if page_i < plan.len() {
            build_page(&mut rng, &mut b, &mut w, plan[page_i], &mut section_probes);
            page_i += 1;
        } else {
            match round % 4 {
                1 if posts < 12 => {
                    write_post(&mut rng, &mut b, &mut w, posts);
                    posts += 1;
                }
                3 if extra_i < extras.len() => {
                    let which = extras[extra_i];
                    extra_i += 1;
                    b.user(format!(
                        "Can we add a {} page as well? Same style as the others, {}.",
                        capitalize(which),
                        rng.pick(&[
                            "nothing fancy",
                            "keep it short",
                            "you know the drill by now",
                            "draft it and I'll review"
                        ])
                    ));
                    build_page(&mut rng, &mut b, &mut w, which, &mut section_probes);
                }
                _ => {
                    let pi = reviews % w.pages.len();
                    reviews += 1;
                    review_round(&mut rng, &mut b, &mut w, pi);
                }
            }
            round += 1;
        }
        if page_i == 1 && !font_asked {
            font_asked = true;
            font_choice(&mut rng, &mut b, &mut w);
        }
    }
    if !font_asked {
        font_choice(&mut rng, &mut b, &mut w);
    }

    // The next request comes last.
    let contact =
        w.pages.iter().find(|p| p.slug == "/contact").or(w.pages.last()).map(|p| (p.id.clone(), p.title.clone()));
    let (cid, ctitle) = contact.unwrap_or_default();
    let n_q = rng.between(4, 6);
    let ask = b.user(format!(
        "This is looking really good. Next: add an FAQ section to the {ctitle} page with {n_q} questions about opening hours, parking, payment and bookings (you can draft the answers, keep them short), then publish Home and {}. Leave the others as drafts for now.",
        capitalize(offer)
    ));
    b.probe(
        ProbeKind::Continuation,
        "faq-then-publish",
        q(
            "What should the assistant do next?",
            format!("Add an FAQ section with {n_q} questions to the {ctitle} page, then publish Home and {}; keep the rest as drafts.", capitalize(offer)),
            &[&["FAQ"], &[&ctitle], &["publish"]],
        ),
        ask,
    );
    let fin = b.assistant(format!(
        "Will do. Next I'll add the FAQ section to {ctitle} ({cid}) with {n_q} short questions (opening hours, parking, payment, bookings), show you the draft answers, and then publish Home and {}. Everything else stays in draft.",
        capitalize(offer)
    ));
    b.probe(
        ProbeKind::Continuation,
        "faq-page-id",
        q(
            "On which page (id) will the FAQ section go?",
            format!("{ctitle}, page {cid}."),
            &[&[&cid, cid.trim_start_matches("pg_")]],
        ),
        fin,
    );
    finish.scenario = format!("{}: {} pages, {} posts, {} review rounds", biz.name, w.pages.len(), posts, reviews);
    b.finish(finish)
}

fn build_page(rng: &mut Rng, b: &mut Builder, w: &mut World, which: &str, section_probes: &mut usize) {
    let pi = if which == "home" {
        0
    } else {
        let title = capitalize(which);
        let slug = format!("/{which}");
        let id = format!("pg_{}", rng.hex(8));
        let created = obj(vec![
            ("id", s(&id)),
            ("siteId", s(&w.site_id)),
            ("title", s(&title)),
            ("slug", s(&slug)),
            ("status", s("draft")),
            (
                "previewUrl",
                s(format!("https://preview.sitekit.io/{}/pages/{}", w.site_id, id.trim_start_matches("pg_"))),
            ),
            ("createdAt", s(w.now(rng))),
        ])
        .pretty();
        let r = b.tool(
            format!("Creating the {title} page."),
            Call::ok("cms_createPage", obj(vec![("title", s(&title)), ("slug", s(&slug))]).compact(), created),
        );
        let short = id.trim_start_matches("pg_").to_string();
        b.probe(
            ProbeKind::Artifact,
            &format!("page-{which}"),
            q(
                format!("What is the page id of the {title} page, and its slug?"),
                format!("{id}, slug {slug}."),
                &[&[&id, &short], &[&slug, which]],
            ),
            r.results[0],
        );
        w.pages.push(Page { id, title, slug, sections: Vec::new(), status: "draft" });
        w.pages.len() - 1
    };
    let kinds: Vec<&str> = match which {
        "home" => vec!["hero", "rich_text", "features", "testimonials", "cta"],
        "about" => vec!["hero", "rich_text", "team_grid", "stats", "gallery"],
        "contact" => vec!["rich_text", "contact_form"],
        "pricing" => vec!["hero", "pricing_table", "faq", "cta"],
        "faq" => vec!["rich_text", "faq", "cta"],
        "team" => vec!["hero", "team_grid", "testimonials"],
        "careers" => vec!["hero", "rich_text", "features", "contact_form"],
        "gallery" => vec!["rich_text", "gallery", "cta"],
        "reviews" => vec!["hero", "testimonials", "logo_cloud", "cta"],
        "partners" => vec!["rich_text", "logo_cloud", "features"],
        _ => vec!["hero", "features", "pricing_table", "gallery", "faq", "cta"],
    };
    // Hero images come from a search.
    let mut hero_img: Option<J> = None;
    if kinds.contains(&"hero") {
        let query = format!("{} {}", w.biz.kind, rng.pick(&["interior", "storefront", "detail", "team at work"]));
        let n = rng.between(12, 20);
        let imgs: Vec<J> = (0..n).map(|_| w.image(rng, "storefront")).collect();
        let pick = rng.below(imgs.len());
        let chosen = imgs[pick].clone();
        let id = match &imgs[pick] {
            J::Obj(p) => match &p[0].1 {
                J::Str(x) => x.clone(),
                _ => String::new(),
            },
            _ => String::new(),
        };
        let r = b.tool(
            format!("Looking for a hero image for {}.", w.pages[pi].title),
            Call::ok(
                "cms_searchImages",
                obj(vec![("query", s(&query)), ("limit", int(n as i64))]).compact(),
                obj(vec![
                    ("query", s(&query)),
                    ("total", int(n as i64 + rng.range(0, 60) as i64)),
                    ("results", J::Arr(imgs)),
                ])
                .pretty(),
            ),
        );
        let _ = r;
        let note = b.assistant(format!(
            "I'll use {id} for the {} hero: it's one of your own photos, landscape, with space on the left for the headline.",
            w.pages[pi].title
        ));
        if pi == 0 {
            b.probe(
                ProbeKind::Recall,
                "home-hero-image",
                q("Which image did the assistant pick for the Home hero?", id.clone(), &[&[&id]]),
                note,
            );
        }
        hero_img = Some(chosen);
    }
    for kind in kinds {
        let mut content = section_content(rng, w, kind);
        if let (Some(img), "hero", J::Obj(p)) = (&hero_img, kind, &mut content) {
            for (k, v) in p.iter_mut() {
                if k == "image" {
                    *v = img.clone();
                }
            }
        }
        let sid = format!("sec_{}", rng.hex(10));
        let pid = w.pages[pi].id.clone();
        // Sometimes the first attempt breaks a limit.
        if kind == "features" && rng.chance(50) {
            b.tool(
                format!("Adding the {} section.", kind.replace('_', " ")),
                Call::err(
                    "cms_addSection",
                    obj(vec![
                        ("pageId", s(&pid)),
                        ("type", s(kind)),
                        ("content", obj(vec![("heading", s(headline(rng, w)))])),
                    ])
                    .compact(),
                    obj(vec![
                        ("error", s("ValidationError")),
                        ("message", s("content.items is required for type features")),
                        ("field", s("content.items")),
                        ("status", int(422)),
                    ])
                    .pretty(),
                ),
            );
        }
        let result = obj(vec![
            ("id", s(&sid)),
            ("pageId", s(&pid)),
            ("type", s(kind)),
            ("order", int(w.pages[pi].sections.len() as i64)),
            ("content", content.clone()),
            ("createdAt", s(w.now(rng))),
        ])
        .pretty();
        let r = b.tool(
            format!("Adding the {} section to {}.", kind.replace('_', " "), w.pages[pi].title),
            Call::ok(
                "cms_addSection",
                obj(vec![("pageId", s(&pid)), ("type", s(kind)), ("content", content.clone())]).compact(),
                result,
            ),
        );
        if kind == "contact_form" && which == "contact" {
            let email = format!("hello@{}.com", w.biz.name.to_lowercase().replace([' ', '&'], ""));
            b.probe(
                ProbeKind::Recall,
                "form-recipient",
                q("Which email address does the contact form send messages to?", email.clone(), &[&[&email]]),
                r.results[0],
            );
        }
        if *section_probes < 6
            && (kind == "testimonials" || kind == "pricing_table" || kind == "contact_form" || kind == "team_grid")
        {
            *section_probes += 1;
            let label = kind.replace('_', " ");
            let short = sid.trim_start_matches("sec_").to_string();
            b.probe(
                ProbeKind::Artifact,
                &format!("section-{kind}"),
                q(
                    format!("What is the section id of the {label} section on the {} page?", w.pages[pi].title),
                    sid.clone(),
                    &[&[&sid, &short]],
                ),
                r.results[0],
            );
        }
        w.pages[pi].sections.push(Section { id: sid, kind, content });
    }
    // Show the page back.
    let page = page_json(&w.pages[pi], &w.site_id).pretty();
    let pid = w.pages[pi].id.clone();
    b.tool(
        format!("Reading {} back to check the result.", w.pages[pi].title),
        Call::ok("cms_getPage", obj(vec![("pageId", s(&pid))]).compact(), page),
    );
    let summary = w.pages[pi]
        .sections
        .iter()
        .map(|x| format!("- {} ({})", x.kind.replace('_', " "), x.id))
        .collect::<Vec<_>>()
        .join("\n");
    b.assistant(format!(
        "{} ({pid}) is drafted with these sections:\n{summary}\nHave a look in the preview and tell me what you'd like changed.",
        w.pages[pi].title
    ));
    b.user(
        rng.pick(&[
            "Looks good overall. Keep going.".to_string(),
            "Nice, the spacing feels right. Next page please.".to_string(),
            format!("Good start. The {} copy is a bit long but let's fix that at the end.", w.pages[pi].title),
            "ok, continue".to_string(),
        ])
        .clone(),
    );
}

fn font_choice(rng: &mut Rng, b: &mut Builder, w: &mut World) {
    b.assistant(format!(
        "A question on typography before I go further: {} at 17px reads a little small on mobile with {} headings. Two options:\nA) switch body text to {} (slightly wider, friendlier);\nB) keep {} and bump the base size to 18px.\nWhich do you prefer?",
        w.body_font, w.heading_font, w.rejected_body_font, w.body_font
    ));
    let u = b.user(format!(
        "B. Keep {} and go to 18px. I tried {} on our old site and didn't like it, so please don't suggest it again.",
        w.body_font, w.rejected_body_font
    ));
    b.probe(
        ProbeKind::Decision,
        "body-font",
        q(
            "Which body font did the user keep, and which one did they reject?",
            format!("Kept {} at 18px; rejected {}.", w.body_font, w.rejected_body_font),
            &[&[w.body_font], &[w.rejected_body_font], &["18px"]],
        ),
        u,
    );
    let theme = obj(vec![("typography", obj(vec![("bodyFont", s(w.body_font)), ("baseSize", int(18))]))]);
    let mut res = theme.clone();
    if let J::Obj(p) = &mut res {
        p.push(("updatedAt".to_string(), s(w.now(rng))));
    }
    b.tool(
        "Done, updating the theme.",
        Call::ok("cms_updateTheme", obj(vec![("theme", theme)]).compact(), res.pretty()),
    );
}

const OFFERS: &[(&str, &str)] = &[
    ("add a sticky 'Book now' bar at the bottom on mobile", "sticky bar"),
    ("add a newsletter signup above the footer", "newsletter signup"),
    ("turn the testimonials into an auto-rotating slider", "auto-rotating slider"),
    ("add a live chat widget", "live chat widget"),
    ("show an Instagram feed on the page", "Instagram feed"),
    ("add a cookie-free analytics banner", "analytics banner"),
    ("put a countdown timer on the next offer", "countdown timer"),
];

const FEEDBACK: &[&str] = &[
    "The headline on the first section is too long, can you make it punchier? Max six words.",
    "The body text there feels crowded. Cut it by a third.",
    "Replace the second paragraph with something about how we work with first-time clients.",
    "The button label should be more specific than 'Learn more'.",
    "Can you rewrite that section in a warmer tone? It sounds like a brochure.",
    "Use a different image there, something with more light in it.",
    "Swap the order of the highlights and the testimonials.",
    "The call to action should say 'Book a visit' instead.",
    "Can the testimonials be shorter? Two sentences each max.",
    "The intro paragraph sounds a bit generic. Mention that we're independent.",
    "Use the inverted variant for the last section so the page ends on the primary colour.",
];

fn review_round(rng: &mut Rng, b: &mut Builder, w: &mut World, pi: usize) {
    let pid = w.pages[pi].id.clone();
    let fb = *rng.pick(FEEDBACK);
    b.user(format!("Back to the {} page. {fb}", w.pages[pi].title));
    b.tool(
        format!("Reading {} first.", w.pages[pi].title),
        Call::ok("cms_getPage", obj(vec![("pageId", s(&pid))]).compact(), page_json(&w.pages[pi], &w.site_id).pretty()),
    );
    if w.pages[pi].sections.is_empty() {
        return;
    }
    let si = rng.below(w.pages[pi].sections.len());
    let sec = w.pages[pi].sections[si].clone();
    let new_content = section_content(rng, w, sec.kind);
    if rng.chance(30) {
        b.tool(
            format!("Updating {}.", sec.id),
            Call::err(
                "cms_updateSection",
                obj(vec![
                    ("pageId", s(&pid)),
                    ("sectionId", s(&sec.id)),
                    ("content", obj(vec![("ctaUrl", s("contact"))])),
                ])
                .compact(),
                obj(vec![
                    ("error", s("ValidationError")),
                    ("message", s("ctaUrl must be a relative path starting with / or an absolute https:// URL")),
                    ("field", s("content.ctaUrl")),
                    ("status", int(422)),
                ])
                .pretty(),
            ),
        );
    }
    let res = obj(vec![
        ("id", s(&sec.id)),
        ("pageId", s(&pid)),
        ("type", s(sec.kind)),
        ("content", new_content.clone()),
        ("updatedAt", s(w.now(rng))),
    ])
    .pretty();
    b.tool(
        format!("Updating the {} section ({}).", sec.kind.replace('_', " "), sec.id),
        Call::ok(
            "cms_updateSection",
            obj(vec![("pageId", s(&pid)), ("sectionId", s(&sec.id)), ("content", new_content.clone())]).compact(),
            res,
        ),
    );
    w.pages[pi].sections[si].content = new_content;
    if w.offered < OFFERS.len() && rng.chance(40) {
        // An option offered and turned down, each at most once.
        let (offer, reject) = OFFERS[w.offer_order[w.offered]];
        w.offered += 1;
        b.assistant(format!("Updated. While we're here: I could also {offer}. Want that?"));
        let u = b.user(format!("No {reject}, thanks. Keep it simple."));
        b.probe(
            ProbeKind::Decision,
            &format!("no-{}", reject.replace(' ', "-").replace('\'', "")),
            q(
                format!("What did the user decline on the {} page?", w.pages[pi].title),
                format!("The {reject}."),
                &[&[reject]],
            ),
            u,
        );
    } else {
        b.assistant(format!("Updated {} on {}. Anything else on this page?", sec.id, w.pages[pi].title));
        b.user(rng.pick(&["that's better", "ok", "Perfect.", "Yes, much better, thanks."]).to_string());
    }
}

fn write_post(rng: &mut Rng, b: &mut Builder, w: &mut World, n: usize) {
    let sv = *rng.pick(w.biz.services);
    let title = rng
        .pick(&[
            format!("A beginner's guide to {sv}"),
            format!("What we learned from ten years of {sv}"),
            format!("{}: five questions we hear every week", capitalize(sv)),
            format!("Behind the scenes: {sv} at {}", w.biz.name),
        ])
        .clone();
    b.user(format!("Can you write blog post #{} for us? Topic: {title}. Around 800 words, friendly tone.", n + 1));
    let body = (0..rng.between(8, 12))
        .map(|i| {
            format!(
                "## {}\n\n{}",
                if i == 0 { "Why it matters".to_string() } else { headline(rng, w) },
                para(rng, w, 6)
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    let slug = format!(
        "/blog/{}",
        title
            .to_lowercase()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "-")
            .split('-')
            .filter(|x| !x.is_empty())
            .collect::<Vec<_>>()
            .join("-")
    );
    let id = format!("post_{}", rng.hex(8));
    let res = obj(vec![
        ("id", s(&id)),
        ("title", s(&title)),
        ("slug", s(&slug)),
        ("status", s("draft")),
        ("wordCount", int(body.split_whitespace().count() as i64)),
        ("tags", J::Arr(vec![s(sv), s("news")])),
        ("createdAt", s(w.now(rng))),
    ])
    .pretty();
    b.tool(
        "Here's the draft; saving it as a draft post.",
        Call::ok(
            "cms_createPost",
            obj(vec![
                ("title", s(&title)),
                ("slug", s(&slug)),
                ("body", s(&body)),
                ("tags", J::Arr(vec![s(sv), s("news")])),
            ])
            .compact(),
            res,
        ),
    );
    b.assistant(format!(
        "Saved \"{title}\" as a draft ({id}, {slug}). It isn't published; tell me when you want it live."
    ));
    b.user(rng.pick(&["ok", "Thanks, will read it tonight.", "ya good", "Great."]).to_string());
}
