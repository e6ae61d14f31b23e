//! `paper`: a staged paper-writing chat in Indonesian (the domain of seed 000).
//!
//! A student writes a paper with an assistant through fixed stages (gagasan, topik, outline,
//! abstrak, pendahuluan, ...). Every message after the system prompt carries the `stage` of
//! the stage it belongs to; the user's approval message of a stage carries
//! `meta.stage_decision` (what was decided), and the assistant's acknowledgement opens the
//! next stage. Inside a stage: long drafts, revisions on request, web searches, uploaded
//! references read in full, questions, and short chitchat ("ok", "ya", "lanjut") that the
//! `priority-chain` strategy strips first. The last stage is still open when the recording
//! ends.
//!
//! Planted facts: the topic, target journal and deadline (message 1), each stage's decision on
//! its approval message (with the option rejected), the working title, sample size and
//! results in the drafts, a detail of an uploaded reference, and what to do next at the end.

use compaction::{Conversation, Message, ProbeKind};
use serde_json::Value;

use super::build::{capitalize, decimal, fill_text, obj, q, s, Builder, Call, IdStyle, J};
use super::rng::Rng;
use super::Spec;

struct Topic {
    tema: &'static str,
    x: &'static str,
    y: &'static str,
    pop: &'static str,
    lok: &'static str,
    bidang: &'static str,
    teori: &'static str,
    sumber: &'static str,
    metode: &'static str,
    metode_key: &'static str,
    ditolak: &'static str,
    ditolak_key: &'static str,
    analisis: &'static str,
    instrumen: &'static str,
    jurnal: &'static str,
    sinta: &'static str,
    fokus_ditolak: &'static str,
    judul: &'static str,
}

const TOPICS: &[Topic] = &[
    Topic {
        tema: "pengaruh intensitas penggunaan media sosial terhadap prokrastinasi akademik mahasiswa",
        x: "intensitas penggunaan media sosial",
        y: "prokrastinasi akademik",
        pop: "mahasiswa S1",
        lok: "Yogyakarta",
        bidang: "psikologi pendidikan",
        teori: "teori regulasi diri (self-regulation theory)",
        sumber: "APJII",
        metode: "survei kuantitatif dengan kuesioner daring",
        metode_key: "survei kuantitatif",
        ditolak: "wawancara mendalam (kualitatif)",
        ditolak_key: "wawancara mendalam",
        analisis: "PLS-SEM dengan SmartPLS 4",
        instrumen: "Tuckman Procrastination Scale",
        jurnal: "Jurnal Psikologi Pendidikan dan Konseling",
        sinta: "SINTA 3",
        fokus_ditolak: "kecanduan game online",
        judul:
            "Scroll Dulu, Kerjakan Nanti: Intensitas Media Sosial dan Prokrastinasi Akademik Mahasiswa di Yogyakarta",
    },
    Topic {
        tema: "dampak program Kartu Prakerja terhadap keterserapan kerja lulusan SMK",
        x: "partisipasi program Kartu Prakerja",
        y: "keterserapan kerja",
        pop: "lulusan SMK usia 18-24 tahun",
        lok: "Jawa Barat",
        bidang: "ekonomi ketenagakerjaan",
        teori: "teori modal manusia (human capital theory)",
        sumber: "Sakernas BPS",
        metode: "analisis data sekunder Sakernas dengan propensity score matching",
        metode_key: "propensity score matching",
        ditolak: "eksperimen lapangan (RCT)",
        ditolak_key: "RCT",
        analisis: "regresi logistik setelah matching di Stata 17",
        instrumen: "kuesioner Sakernas Agustus",
        jurnal: "Jurnal Ekonomi Kependudukan dan Keluarga",
        sinta: "SINTA 2",
        fokus_ditolak: "pengangguran lulusan sarjana",
        judul: "Dari Pelatihan ke Pekerjaan: Evaluasi Kartu Prakerja bagi Lulusan SMK di Jawa Barat",
    },
    Topic {
        tema: "analisis sentimen ulasan aplikasi dompet digital menggunakan IndoBERT",
        x: "fitur aplikasi dompet digital",
        y: "sentimen pengguna",
        pop: "ulasan pengguna di Google Play",
        lok: "Indonesia",
        bidang: "ilmu komputer terapan",
        teori: "model penerimaan teknologi (TAM)",
        sumber: "Bank Indonesia",
        metode: "fine-tuning IndoBERT pada 40.000 ulasan berlabel",
        metode_key: "IndoBERT",
        ditolak: "Naive Bayes dengan TF-IDF sebagai model utama",
        ditolak_key: "Naive Bayes",
        analisis: "evaluasi F1-macro dengan validasi silang 5 lipatan",
        instrumen: "pedoman anotasi tiga kelas (positif, netral, negatif)",
        jurnal: "Jurnal Teknologi Informasi dan Ilmu Komputer",
        sinta: "SINTA 2",
        fokus_ditolak: "deteksi ulasan palsu",
        judul: "Membaca Suara Pengguna: Analisis Sentimen Ulasan Dompet Digital dengan IndoBERT",
    },
    Topic {
        tema: "strategi adaptasi petani padi terhadap perubahan iklim di Kabupaten Indramayu",
        x: "persepsi risiko iklim",
        y: "strategi adaptasi petani",
        pop: "petani padi sawah",
        lok: "Kabupaten Indramayu",
        bidang: "sosiologi pedesaan",
        teori: "teori perilaku terencana (theory of planned behavior)",
        sumber: "BMKG",
        metode: "metode campuran: survei rumah tangga lalu diskusi kelompok terarah",
        metode_key: "metode campuran",
        ditolak: "studi kasus tunggal satu desa",
        ditolak_key: "studi kasus tunggal",
        analisis: "regresi logistik multinomial dan analisis tematik",
        instrumen: "kuesioner rumah tangga tani yang diadaptasi dari FAO",
        jurnal: "Jurnal Sosiologi Pedesaan",
        sinta: "SINTA 2",
        fokus_ditolak: "produktivitas panen",
        judul: "Bertahan di Tengah Cuaca yang Berubah: Strategi Adaptasi Petani Padi di Indramayu",
    },
    Topic {
        tema: "pengaruh literasi keuangan terhadap perilaku menabung generasi Z",
        x: "literasi keuangan",
        y: "perilaku menabung",
        pop: "generasi Z berusia 18-26 tahun",
        lok: "Surabaya",
        bidang: "manajemen keuangan",
        teori: "teori perilaku terencana (theory of planned behavior)",
        sumber: "OJK",
        metode: "survei kuantitatif dengan purposive sampling",
        metode_key: "purposive sampling",
        ditolak: "eksperimen kelas dengan intervensi edukasi",
        ditolak_key: "eksperimen kelas",
        analisis: "regresi linear berganda dengan uji moderasi di SPSS 26",
        instrumen: "OECD/INFE Financial Literacy Toolkit",
        jurnal: "Jurnal Manajemen dan Keuangan",
        sinta: "SINTA 3",
        fokus_ditolak: "investasi kripto",
        judul: "Melek Finansial, Rajin Menabung? Literasi Keuangan dan Perilaku Menabung Generasi Z di Surabaya",
    },
];

const STAGES: &[(&str, &str)] = &[
    ("gagasan", "Gagasan Paper"),
    ("topik", "Penentuan Topik"),
    ("outline", "Menyusun Outline"),
    ("abstrak", "Abstrak"),
    ("pendahuluan", "Pendahuluan"),
    ("tinjauan_literatur", "Tinjauan Literatur"),
    ("metodologi", "Metodologi"),
    ("hasil", "Hasil Penelitian"),
    ("diskusi", "Diskusi"),
    ("kesimpulan", "Kesimpulan"),
    ("daftar_pustaka", "Daftar Pustaka"),
    ("lampiran", "Lampiran"),
    ("judul", "Pemilihan Judul"),
];

const AUTHORS: &[&str] = &[
    "Wulandari",
    "Santoso",
    "Pratama",
    "Hidayat",
    "Nugroho",
    "Lestari",
    "Siregar",
    "Rahmawati",
    "Kurniawan",
    "Saputra",
    "Setiawan",
    "Handayani",
    "Purnomo",
    "Sari",
    "Nasution",
    "Kim",
    "Chen",
    "Rahman",
    "Steel",
    "Ferrari",
];

const SENTENCES: &[&str] = &[
    "Dalam satu dekade terakhir, {X} menjadi isu yang semakin banyak dibahas dalam kajian {bidang}.",
    "Sejumlah penelitian menunjukkan bahwa {X} berkaitan erat dengan {Y} pada {pop} {cite}.",
    "Namun demikian, temuan-temuan tersebut belum sepenuhnya konsisten, terutama pada konteks {lok}.",
    "Penelitian ini berupaya mengisi celah tersebut dengan menguji hubungan antara {X} dan {Y} secara empiris.",
    "Secara teoretis, hubungan ini dapat dijelaskan melalui kerangka {teori}.",
    "{ay} menemukan bahwa peningkatan {X} diikuti oleh perubahan yang bermakna pada {Y}.",
    "Di sisi lain, {ay} berpendapat bahwa pengaruh tersebut dimoderasi oleh faktor sosial ekonomi.",
    "Data {sumber} menunjukkan bahwa {angka} persen {pop} mengalami kondisi serupa pada tahun {tahun}.",
    "Dengan demikian, pemahaman yang lebih mendalam mengenai {Y} menjadi penting bagi pengambil kebijakan.",
    "Kontribusi penelitian ini terletak pada penggunaan {metode} dengan sampel yang lebih representatif.",
    "Selain itu, penelitian ini juga mempertimbangkan variabel kontrol seperti usia, jenis kelamin, dan latar belakang pendidikan.",
    "Keterbatasan utama penelitian terdahulu adalah ukuran sampel yang relatif kecil dan desain potong lintang {cite}.",
    "Oleh karena itu, hasil penelitian ini diharapkan dapat memperkaya literatur {bidang} di Indonesia.",
    "Temuan ini sejalan dengan argumen bahwa {X} tidak berdiri sendiri, melainkan terkait dengan lingkungan sosial individu {cite}.",
    "Implikasi praktisnya, lembaga terkait perlu merancang intervensi yang menyasar {Y} secara langsung.",
    "Pendekatan ini dipilih karena mampu menangkap hubungan antarvariabel secara simultan.",
    "Instrumen penelitian diadaptasi dari {instrumen} yang telah divalidasi pada konteks Indonesia.",
    "Analisis data dilakukan menggunakan {analisis}.",
    "Temuan ini perlu ditafsirkan dengan hati-hati mengingat karakteristik {pop} yang beragam.",
    "Berbagai studi di Asia Tenggara melaporkan pola yang mirip, meskipun dengan besaran efek yang berbeda {cite}.",
    "Hal ini menegaskan pentingnya memperhatikan konteks lokal ketika menafsirkan hubungan antara {X} dan {Y}.",
    "Pada tingkat konseptual, {Y} dipahami sebagai hasil interaksi antara faktor individu dan faktor lingkungan.",
    "Kajian {ay} menggunakan desain longitudinal dan menemukan bahwa efek {X} bertahan hingga dua tahun.",
    "Meski demikian, sebagian besar kajian masih berfokus pada kota-kota besar di luar {lok}.",
    "Celah inilah yang menjadi titik berangkat penelitian ini.",
    "Peneliti juga menjaga etika penelitian dengan meminta persetujuan tertulis dari seluruh partisipan.",
    "Secara statistik, kekuatan hubungan tersebut tergolong sedang menurut kriteria Cohen.",
    "Hasil ini memberi dasar empiris bagi rekomendasi yang lebih terarah.",
];

const CHITCHAT: &[&str] =
    &["ok", "ya", "lanjut", "sip", "oke", "mantap", "siap", "oke lanjut", "ok sip", "baik", "ya lanjut", "hmm ok"];

struct Ref {
    author: &'static str,
    year: u32,
    title: String,
    journal: &'static str,
}

impl Ref {
    /// `(Wulandari, 2019)`.
    fn cite(&self) -> String {
        format!("({}, {})", self.author, self.year)
    }
    /// `Wulandari (2019)`.
    fn ay(&self) -> String {
        format!("{} ({})", self.author, self.year)
    }
}

struct World {
    t: &'static Topic,
    refs: Vec<Ref>,
    n_sample: u64,
    deadline: String,
    words: u64,
    day: i64,
}

fn fill(rng: &mut Rng, w: &World, t: &str) -> String {
    let r = &w.refs[rng.below(w.refs.len())];
    t.replace("{X}", w.t.x)
        .replace("{Y}", w.t.y)
        .replace("{pop}", w.t.pop)
        .replace("{lok}", w.t.lok)
        .replace("{bidang}", w.t.bidang)
        .replace("{teori}", w.t.teori)
        .replace("{sumber}", w.t.sumber)
        .replace("{metode}", w.t.metode)
        .replace("{analisis}", w.t.analisis)
        .replace("{instrumen}", w.t.instrumen)
        .replace("{cite}", &r.cite())
        .replace("{ay}", &r.ay())
        .replace("{angka}", &rng.range(12, 68).to_string())
        .replace("{tahun}", &rng.range(2019, 2023).to_string())
}

fn paragraph(rng: &mut Rng, w: &World, n: usize) -> String {
    let picked = rng.sample(SENTENCES, n);
    let mut out: Vec<String> = Vec::with_capacity(n);
    for t in picked {
        out.push(capitalize(&fill(rng, w, t)));
    }
    out.join(" ")
}

fn prose(rng: &mut Rng, w: &World, paras: usize) -> String {
    (0..paras)
        .map(|_| {
            let n = rng.between(4, 7);
            paragraph(rng, w, n)
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// A decimal with a comma, as Indonesian writes it (`0,412`).
fn koma(value: i64, places: u32) -> String {
    decimal(value, places).replace('.', ",")
}

/// A stage's draft; returns the text and the facts it plants (label, value).
fn draft(rng: &mut Rng, w: &World, stage: &str, version: usize) -> (String, Vec<(&'static str, String)>) {
    let t = w.t;
    let mut facts = Vec::new();
    let head = if version == 0 {
        format!("Berikut draf {} (versi 1):\n\n", label(stage))
    } else {
        format!("Sudah aku revisi. Ini draf {} versi {}:\n\n", label(stage), version + 1)
    };
    let body = match stage {
        "gagasan" => format!(
            "**Gagasan utama:** {}.\n\n**Mengapa penting:** {}\n\n**Sudut pandang yang ditawarkan:**\n1. Menguji hubungan {} dan {} pada {} di {}.\n2. Memakai kerangka {}.\n3. Menggunakan data terbaru {}.\n\n**Alternatif fokus yang juga mungkin:** {} (lebih sempit, datanya lebih sulit).\n\n{}",
            capitalize(t.tema),
            paragraph(rng, w, 5),
            t.x,
            t.y,
            t.pop,
            t.lok,
            t.teori,
            t.sumber,
            t.fokus_ditolak,
            prose(rng, w, 2)
        ),
        "topik" => format!(
            "**Judul kerja:** \"{}\"\n\n**Rumusan masalah:**\n1. Bagaimana gambaran {} dan {} pada {} di {}?\n2. Seberapa besar pengaruh {} terhadap {}?\n3. Faktor apa yang memperkuat atau memperlemah pengaruh tersebut?\n\n**Tujuan penelitian:** {}\n\n{}",
            t.judul,
            t.x,
            t.y,
            t.pop,
            t.lok,
            t.x,
            t.y,
            paragraph(rng, w, 3),
            prose(rng, w, 3)
        ),
        "outline" => {
            let mut o = String::new();
            for (i, (bab, subs)) in [
                ("Pendahuluan", vec!["Latar belakang", "Rumusan masalah", "Tujuan dan manfaat"]),
                ("Tinjauan Literatur", vec!["Kerangka teori", "Penelitian terdahulu", "Hipotesis"]),
                ("Metodologi", vec!["Desain penelitian", "Populasi dan sampel", "Instrumen", "Teknik analisis"]),
                ("Hasil dan Pembahasan", vec!["Profil responden", "Uji instrumen", "Uji hipotesis", "Pembahasan"]),
                ("Kesimpulan", vec!["Kesimpulan", "Implikasi", "Keterbatasan dan saran"]),
            ]
            .iter()
            .enumerate()
            {
                o.push_str(&format!("**Bab {}. {bab}**\n", i + 1));
                for (j, sub) in subs.iter().enumerate() {
                    o.push_str(&format!("{}.{} {sub}: {}\n", i + 1, j + 1, paragraph(rng, w, 1)));
                }
                o.push('\n');
            }
            o + &prose(rng, w, 1)
        }
        "abstrak" => format!(
            "**Abstrak**\n\n{}\n\n**Kata kunci:** {}; {}; {}; {}\n\n**Abstract**\n\nThis study examines the effect of {} on {} among {} in {}. Using {}, data were analysed with {}. The results indicate a moderate positive relationship. Implications for policy and practice are discussed.",
            prose(rng, w, 2),
            t.x,
            t.y,
            t.pop,
            t.lok,
            t.x,
            t.y,
            t.pop,
            t.lok,
            t.metode,
            t.analisis
        ),
        "metodologi" => {
            let moe = rng.range(3, 5);
            facts.push(("sample", format!("n = {}", w.n_sample)));
            format!(
                "**3.1 Desain penelitian.** Penelitian ini menggunakan {}. {}\n\n**3.2 Populasi dan sampel.** Populasi adalah {} di {}. Ukuran sampel minimum dihitung dengan rumus Slovin (margin of error {moe}%), sehingga diperoleh n = {} responden. {}\n\n**3.3 Instrumen.** {}\n\n**3.4 Teknik analisis.** {}\n\n{}",
                t.metode,
                paragraph(rng, w, 3),
                t.pop,
                t.lok,
                w.n_sample,
                paragraph(rng, w, 2),
                paragraph(rng, w, 3),
                paragraph(rng, w, 3),
                prose(rng, w, 2)
            )
        }
        "hasil" => {
            let beta = rng.range(180, 520) as i64;
            let r2 = rng.range(200, 480) as i64;
            facts.push(("beta", koma(beta, 3)));
            facts.push(("r2", koma(r2, 3)));
            let mut table = String::from("**Tabel 3. Hasil uji hipotesis**\n\n| Hipotesis | Jalur | Koefisien | t | p | Keputusan |\n|---|---|---|---|---|---|\n");
            table.push_str(&format!("| H1 | {} -> {} | {} | {} | < 0,001 | Diterima |\n", t.x, t.y, koma(beta, 3), koma(rng.range(400, 900) as i64, 2)));
            table.push_str(&format!("| H2 | kontrol diri -> {} | {} | {} | {} | Diterima |\n", t.y, koma(-(rng.range(100, 300) as i64), 3), koma(rng.range(250, 500) as i64, 2), koma(rng.range(1, 40) as i64, 3)));
            table.push_str(&format!("| H3 | moderasi jenis kelamin | {} | {} | {} | Ditolak |\n", koma(rng.range(5, 60) as i64, 3), koma(rng.range(20, 150) as i64, 2), koma(rng.range(200, 800) as i64, 3)));
            format!(
                "**4.1 Profil responden.** Dari {} responden, {} persen perempuan. {}\n\n{table}\nNilai R² untuk {} sebesar {}, artinya {} menjelaskan sekitar {} persen variasi {}.\n\n{}",
                w.n_sample,
                rng.range(45, 68),
                paragraph(rng, w, 3),
                t.y,
                koma(r2, 3),
                t.x,
                r2 / 10,
                t.y,
                prose(rng, w, 3)
            )
        }
        "daftar_pustaka" => {
            let mut list: Vec<&Ref> = w.refs.iter().collect();
            list.sort_by(|a, b| a.author.cmp(b.author).then(a.year.cmp(&b.year)));
            list.iter()
                .map(|r| {
                    format!(
                        "{}, {}. ({}). {}. *{}*, {}({}), {}-{}.",
                        r.author,
                        char::from(b'A' + (r.year % 26) as u8),
                        r.year,
                        r.title,
                        r.journal,
                        r.year - 2000 + rng.range(1, 9) as u32,
                        rng.range(1, 4),
                        rng.range(1, 120),
                        rng.range(121, 240)
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
                + "\n\n"
                + &paragraph(rng, w, 2)
        }
        "judul" => format!(
            "Tiga alternatif judul final:\n1. \"{}\"\n2. \"Pengaruh {} terhadap {} pada {} di {}\"\n3. \"{}: Bukti dari {}\"\n\n{}",
            t.judul,
            capitalize(t.x),
            capitalize(t.y),
            t.pop,
            t.lok,
            capitalize(t.y),
            t.lok,
            paragraph(rng, w, 3)
        ),
        _ => {
            let n = rng.between(6, 10);
            prose(rng, w, n)
        }
    };
    (head + &body, facts)
}

fn label(stage: &str) -> &'static str {
    STAGES.iter().find(|(k, _)| *k == stage).map_or("Tahap", |(_, l)| *l)
}

/// The decision recorded when a stage is approved, the user's approval text, and the facts a
/// decision probe asks for (each must occur in the approval text).
fn decision(w: &World, stage: &str) -> (String, String, Vec<String>) {
    let t = w.t;
    match stage {
        "gagasan" => (
            format!(
                "Fokus pada {} dan {} pada {} di {}; fokus {} tidak dipakai.",
                t.x, t.y, t.pop, t.lok, t.fokus_ditolak
            ),
            format!(
                "Oke aku setuju fokusnya {} dan {}. Yang {} nggak usah, kejauhan. Approve gagasannya.",
                t.x, t.y, t.fokus_ditolak
            ),
            vec![t.x.to_string(), t.fokus_ditolak.to_string()],
        ),
        "topik" => (
            format!("Judul kerja: \"{}\"; tiga rumusan masalah.", t.judul),
            format!("Judul kerjanya aku suka: \"{}\". Tiga rumusan masalah cukup. Approve.", t.judul),
            vec![t.judul.to_string()],
        ),
        "outline" => (
            "Lima bab (IMRaD); hasil dan pembahasan digabung dalam satu bab.".to_string(),
            "Outline lima bab oke, hasil dan pembahasan digabung aja biar sesuai template jurnal. Approve outline."
                .to_string(),
            vec!["lima bab".to_string(), "digabung".to_string()],
        ),
        "abstrak" => (
            "Abstrak dwibahasa, maksimal 250 kata, lima kata kunci.".to_string(),
            "Abstraknya oke, dwibahasa, jangan lebih dari 250 kata ya. Approve.".to_string(),
            vec!["250 kata".to_string(), "dwibahasa".to_string()],
        ),
        "pendahuluan" => (
            format!("Pembuka memakai data {}; celah penelitian: konteks {}.", t.sumber, t.lok),
            format!(
                "Pendahuluan approve. Pembukanya pakai data {} itu bagus, dan celahnya jelas: konteks {}.",
                t.sumber, t.lok
            ),
            vec![t.sumber.to_string(), t.lok.to_string()],
        ),
        "tinjauan_literatur" => (
            format!("Kerangka utama: {}; tiga hipotesis.", t.teori),
            format!("Tinjauan literatur approve. Kerangkanya {} aja, dengan tiga hipotesis.", t.teori),
            vec![t.teori.to_string()],
        ),
        "metodologi" => (
            format!("{}; n = {}; analisis {}. Ditolak: {}.", capitalize(t.metode), w.n_sample, t.analisis, t.ditolak),
            format!(
                "Metodologi approve: {}, n = {}, analisisnya {}. Yang {} nggak jadi ya, waktunya nggak cukup.",
                t.metode, w.n_sample, t.analisis, t.ditolak
            ),
            vec![t.metode_key.to_string(), t.ditolak_key.to_string()],
        ),
        "hasil" => (
            "H1 dan H2 diterima, H3 ditolak; laporkan koefisien jalur dan R².".to_string(),
            "Hasil approve. H1 dan H2 diterima, H3 ditolak, tabelnya sudah jelas.".to_string(),
            vec!["H3 ditolak".to_string()],
        ),
        "diskusi" => (
            format!("Bandingkan dengan {}; tambahkan implikasi kebijakan.", w.refs[0].ay()),
            format!("Diskusi approve. Perbandingan dengan {} sudah pas, implikasi kebijakannya juga.", w.refs[0].ay()),
            vec![w.refs[0].author.to_string()],
        ),
        "kesimpulan" => (
            "Tiga poin kesimpulan; saran penelitian longitudinal.".to_string(),
            "Kesimpulan approve, tiga poin cukup, saran longitudinal bagus.".to_string(),
            vec!["longitudinal".to_string()],
        ),
        "daftar_pustaka" => (
            "APA edisi 7; minimal 25 rujukan; 80% terbitan lima tahun terakhir.".to_string(),
            "Daftar pustaka approve. Format APA edisi 7 ya, dan nanti tambah sampai minimal 25 rujukan.".to_string(),
            vec!["APA edisi 7".to_string()],
        ),
        "lampiran" => (
            "Lampiran: kuesioner lengkap dan hasil uji validitas.".to_string(),
            "Lampiran approve: kuesioner lengkap dan hasil uji validitas.".to_string(),
            vec!["kuesioner".to_string()],
        ),
        _ => (
            format!("Judul final: \"{}\".", t.judul),
            format!("Judul final pakai nomor 1: \"{}\". Approve.", t.judul),
            vec![t.judul.to_string()],
        ),
    }
}

fn system_prompt(w: &World) -> String {
    let stages =
        STAGES.iter().enumerate().map(|(i, (k, l))| format!("{}. {l} ({k})", i + 1)).collect::<Vec<_>>().join("\n");
    fill_text(
        include_str!("texts/paper_system.md"),
        &[("stages", &stages), ("date", &super::build::date(w.day)), ("words", &w.words.to_string())],
    )
}

fn staged(m: Message, stage: &str) -> Message {
    m.with_stage(stage)
}

pub(super) fn generate(spec: Spec) -> Conversation {
    let Spec { mut rng, target, mut finish } = spec;
    let t = rng.pick(TOPICS);
    let mut refs = Vec::new();
    let authors = rng.sample(AUTHORS, 14);
    for (i, a) in authors.iter().enumerate() {
        let title = match i % 4 {
            0 => format!("Hubungan {} dan {}: studi pada {}", t.x, t.y, t.pop),
            1 => format!("Peran {} dalam menjelaskan {}", t.x, t.y),
            2 => format!("{} di Indonesia: tinjauan sistematis", capitalize(t.y)),
            _ => format!("Menguji {} pada konteks {}", t.teori, t.lok),
        };
        refs.push(Ref {
            author: a,
            year: rng.range(2015, 2024) as u32,
            title,
            journal: rng.pick_str(&[
                "Jurnal Psikologi",
                "Jurnal Ekonomi dan Kebijakan Publik",
                "Jurnal Ilmu Sosial",
                "Jurnal Ilmiah Manajemen",
                "Jurnal Teknologi dan Sistem Komputer",
            ]),
        });
    }
    let day = super::build::days_from_civil(2024, 2 + rng.range(0, 6) as u32, 1 + rng.range(0, 27) as u32);
    let w = World {
        t,
        refs,
        n_sample: rng.range(180, 420),
        deadline: super::build::date(day + rng.range(30, 75) as i64),
        words: 500 * rng.range(10, 16),
        day,
    };
    let mut b = Builder::new(rng.fork(), IdStyle::OpenAi);
    b.system(system_prompt(&w));

    // How far the recording gets: every stage costs about 9-20k tokens.
    let n_stages = ((target / 16_000) as usize).clamp(3, STAGES.len() - 2);
    let first = STAGES[0].0;
    let deadline_text = format!("deadline submit {}", w.deadline);
    let open = b.push(staged(
        Message::user(format!(
            "Halo kak, aku mau nulis paper tentang {} buat submit ke {} ({}). {}, targetnya sekitar {} kata. Dosen pembimbingku minta datanya dari {}. Bantu dari awal ya.",
            t.tema, t.jurnal, t.sinta, capitalize(&deadline_text), w.words, t.lok
        )),
        first,
    ));
    b.probe(
        ProbeKind::Task,
        "write-paper",
        q(
            "Apa yang diminta pengguna di awal percakapan?",
            format!("Dibantu menulis paper tentang {} untuk {} ({}).", t.tema, t.jurnal, t.sinta),
            &[&[t.tema], &[t.jurnal, t.sinta]],
        ),
        open,
    );
    b.probe(
        ProbeKind::Recall,
        "deadline",
        q("Kapan tenggat pengiriman paper?", w.deadline.clone(), &[&[&w.deadline]]),
        open,
    );

    let mut decisions_probed = 0usize;
    for si in 0..=n_stages {
        let (stage, _) = STAGES[si];
        let last = si == n_stages;
        let remaining = (n_stages + 1 - si) as u64;
        let budget = target.saturating_sub(b.tokens()) / remaining;
        let start = b.tokens();
        let mut version = 0usize;
        // Research first in the stages that need sources.
        if matches!(stage, "pendahuluan" | "tinjauan_literatur" | "diskusi" | "metodologi")
            || (si == 0 && rng.chance(50))
        {
            research(&mut rng, &mut b, &w, stage);
        }
        let (text, facts) = draft(&mut rng, &w, stage, version);
        let d = b.push(staged(Message::assistant(text), stage));
        plant(&mut b, &w, d, &facts);
        version += 1;
        let mut rounds = 0;
        while b.tokens() - start < budget && rounds < 24 {
            rounds += 1;
            match rng.below(5) {
                0 => {
                    b.push(staged(Message::user(rng.pick(CHITCHAT).to_string()), stage));
                    let (text, _) = draft(&mut rng, &w, stage, version);
                    b.push(staged(Message::assistant(text), stage));
                    version += 1;
                }
                1 => {
                    let cite = w.refs[rng.below(w.refs.len())].ay();
                    let req = rng
                        .pick(&[
                            "paragraf kedua terlalu panjang, dipadatkan ya".to_string(),
                            format!("tolong tambah data {} terbaru", t.sumber),
                            "bahasanya kurang formal, rapikan lagi".to_string(),
                            format!("kurangi pengulangan kata {}", t.y),
                            format!("tambahkan sitasi {cite}"),
                            "bagian awal terlalu umum, langsung ke masalahnya aja".to_string(),
                        ])
                        .clone();
                    b.push(staged(Message::user(req), stage));
                    let (text, _) = draft(&mut rng, &w, stage, version);
                    b.push(staged(Message::assistant(text), stage));
                    version += 1;
                }
                2 => {
                    let (qn, lead) = rng
                        .pick(&[
                            (
                                format!("bedanya {} sama pendekatan lain apa?", t.analisis),
                                format!("Pertanyaan bagus. {} dipilih karena cocok dengan jumlah sampel dan bentuk data kita.", capitalize(t.analisis)),
                            ),
                            (
                                "kalau dosenku minta teori lain gimana?".to_string(),
                                format!("Bisa, tapi {} tetap paling pas sebagai kerangka utama; teori lain bisa jadi pendukung.", t.teori),
                            ),
                            (
                                format!("apa {} sudah cukup buat generalisasi?", t.pop),
                                format!("Untuk generalisasi ke luar {} kita perlu hati-hati; itu nanti masuk keterbatasan.", t.lok),
                            ),
                            (
                                "perlu uji asumsi klasik nggak?".to_string(),
                                "Tergantung teknik analisisnya; aku jelaskan singkat di bawah.".to_string(),
                            ),
                        ])
                        .clone();
                    b.push(staged(Message::user(qn), stage));
                    let n = rng.between(2, 4);
                    let ans = format!("{lead}\n\n{}", prose(&mut rng, &w, n));
                    b.push(staged(Message::assistant(ans), stage));
                }
                3 => {
                    b.push(staged(Message::user("cari rujukan tambahan buat bagian ini dong".to_string()), stage));
                    research(&mut rng, &mut b, &w, stage);
                    let note = format!(
                        "Aku dapat beberapa rujukan yang relevan dan sudah aku catat. {}",
                        paragraph(&mut rng, &w, 3)
                    );
                    b.push(staged(Message::assistant(note), stage));
                }
                _ => upload(&mut rng, &mut b, &w, stage),
            }
        }
        if last {
            break;
        }
        // Approval, with the decision on the user's message.
        b.push(staged(
            Message::assistant(format!(
                "Ada yang mau direvisi lagi di {}, atau tahap ini sudah bisa di-approve?",
                label(stage)
            )),
            stage,
        ));
        let (dec, approval, facts) = decision(&w, stage);
        let a = b.push(staged(Message::user(approval), stage).with_meta("stage_decision", Value::from(dec.clone())));
        let probe_it = stage == "gagasan" || stage == "metodologi" || (decisions_probed < 6 && rng.chance(50));
        if probe_it && stage != "topik" && stage != "judul" {
            decisions_probed += 1;
            let fact_refs: Vec<&str> = facts.iter().map(String::as_str).collect();
            let groups: Vec<&[&str]> = fact_refs.chunks(1).collect();
            b.probe(
                ProbeKind::Decision,
                stage,
                q(format!("Apa yang diputuskan saat tahap {} disetujui?", label(stage)), dec.clone(), &groups),
                a,
            );
        }
        if stage == "topik" {
            b.probe(
                ProbeKind::Artifact,
                "working-title",
                q("Apa judul kerja yang disepakati di tahap topik?", t.judul, &[&[t.judul]]),
                a,
            );
        }
        let save = J::Obj(vec![("stage".into(), s(stage)), ("ringkasan".into(), s(&dec))]).compact();
        let next = STAGES[si + 1];
        b.tools(
            format!("Tahap {} disetujui. Aku simpan ringkasannya dulu.", label(stage)),
            vec![Call::ok(
                "updateStageData",
                save,
                obj(vec![("ok", J::Bool(true)), ("stage", s(stage)), ("nextStage", s(next.0))]).compact(),
            )],
        );
        let n = b.next_index();
        // The save call and its result belong to the stage just approved.
        b.message_mut(n - 2).stage = Some(stage.to_string());
        b.message_mut(n - 1).stage = Some(stage.to_string());
        b.push(staged(
            Message::assistant(format!(
                "Tersimpan. Keputusan tahap {}: {} Sekarang kita masuk ke tahap {}. Mau langsung aku buatkan drafnya?",
                label(stage),
                dec,
                next.1
            )),
            next.0,
        ));
        b.push(staged(Message::user(rng.pick(CHITCHAT).to_string()), next.0));
    }

    // The open stage: what to do next.
    let (open_stage, open_label) = STAGES[n_stages];
    let following = STAGES[n_stages + 1];
    let r = &w.refs[1];
    let ask = b.push(staged(
        Message::user(format!(
            "Draf {} ini udah hampir oke. Habis ini revisi sekali lagi: bandingkan dengan temuan {} dan tambahkan satu paragraf keterbatasan sampel. Setelah itu baru kita lanjut ke tahap {}.",
            open_label,
            r.ay(),
            following.1
        )),
        open_stage,
    ));
    b.probe(
        ProbeKind::Continuation,
        "next-revision",
        q(
            "Apa yang harus dikerjakan asisten berikutnya?",
            format!("Merevisi draf {open_label}: membandingkan dengan temuan {} dan menambah paragraf keterbatasan sampel, lalu lanjut ke tahap {}.", r.ay(), following.1),
            &[&[r.author], &["keterbatasan sampel"], &[following.1]],
        ),
        ask,
    );
    b.push(staged(
        Message::assistant(format!(
            "Siap. Aku revisi draf {open_label} dulu: menambahkan perbandingan dengan {} dan satu paragraf tentang keterbatasan sampel ({} di {}). Setelah kamu approve, kita masuk ke {}.",
            r.ay(),
            t.pop,
            t.lok,
            following.1
        )),
        open_stage,
    ));
    finish.scenario = format!("{}: {} stages approved, {} open", t.tema, n_stages, open_stage);
    b.finish(finish)
}

/// Plant the facts a draft carries.
fn plant(b: &mut Builder, w: &World, at: usize, facts: &[(&'static str, String)]) {
    for (label, value) in facts {
        match *label {
            "sample" => {
                b.probe(
                    ProbeKind::Recall,
                    "sample-size",
                    q(
                        "Berapa ukuran sampel di draf metodologi, dan bagaimana menghitungnya?",
                        format!("{value} responden, dengan rumus Slovin."),
                        &[&[value.as_str()], &["Slovin"]],
                    ),
                    at,
                );
            }
            "r2" => {
                b.probe(
                    ProbeKind::Recall,
                    "r-squared",
                    q(format!("Berapa nilai R² untuk {} di draf hasil?", w.t.y), value.clone(), &[&[value.as_str()]]),
                    at,
                );
            }
            "beta" => {
                b.probe(
                    ProbeKind::Artifact,
                    "table-3",
                    q(
                        "Apa isi Tabel 3 di draf hasil, dan berapa koefisien H1?",
                        format!("Tabel 3 berisi hasil uji hipotesis; koefisien H1 {value}."),
                        &[&["Tabel 3"], &[value.as_str()]],
                    ),
                    at,
                );
            }
            _ => {}
        }
    }
}

fn research(rng: &mut Rng, b: &mut Builder, w: &World, stage: &str) {
    let query = format!("{} {} {}", w.t.x, w.t.y, rng.pick(&["Indonesia", "meta-analisis", w.t.lok, "jurnal SINTA"]));
    let n = rng.between(6, 10);
    let results: Vec<J> = (0..n)
        .map(|i| {
            let r = &w.refs[(i + rng.below(w.refs.len())) % w.refs.len()];
            obj(vec![
                ("title", s(&r.title)),
                (
                    "url",
                    s(format!("https://journal.example.ac.id/index.php/j/article/view/{}", rng.range(1000, 99999))),
                ),
                ("snippet", s(format!("{} {}", r.ay(), paragraph(rng, w, 2)))),
                ("published", s(r.year.to_string())),
            ])
        })
        .collect();
    b.tools(
        "Aku cari dulu rujukan yang relevan.",
        vec![Call::ok(
            "web_search",
            J::Obj(vec![("query".into(), s(&query))]).compact(),
            obj(vec![("results", J::Arr(results))]).compact(),
        )],
    );
    let n = b.next_index();
    b.message_mut(n - 2).stage = Some(stage.to_string());
    b.message_mut(n - 1).stage = Some(stage.to_string());
    // Read one source in full.
    let r = &w.refs[rng.below(w.refs.len())];
    let page = format!(
        "{}\n{}\n\nAbstrak\n{}\n\nPendahuluan\n{}\n\nMetode\n{}\n\nHasil\n{}\n\nPembahasan\n{}",
        r.title,
        r.ay(),
        paragraph(rng, w, 5),
        prose(rng, w, 3),
        prose(rng, w, 2),
        prose(rng, w, 3),
        prose(rng, w, 3)
    );
    let url = format!("https://journal.example.ac.id/index.php/j/article/download/{}", rng.range(1000, 99999));
    b.tools(
        format!("Aku baca artikel {} lengkapnya.", r.ay()),
        vec![Call::ok("fetch_url", J::Obj(vec![("url".into(), s(&url))]).compact(), page)],
    );
    let n = b.next_index();
    b.message_mut(n - 2).stage = Some(stage.to_string());
    b.message_mut(n - 1).stage = Some(stage.to_string());
}

fn upload(rng: &mut Rng, b: &mut Builder, w: &World, stage: &str) {
    let r = &w.refs[rng.below(w.refs.len())];
    let file = format!("{}_{}.pdf", r.author, r.year);
    let n_resp = rng.range(120, 900);
    b.push(staged(Message::user(format!("aku upload jurnal {file}, tolong dibaca dan dipakai kalau relevan")), stage));
    let text = format!(
        "{}\n{}\n{}\n\nABSTRAK\n{}\n\nMETODE\nPenelitian ini melibatkan {n_resp} responden. {}\n\nHASIL DAN PEMBAHASAN\n{}\n\nKESIMPULAN\n{}",
        r.title,
        r.ay(),
        r.journal,
        paragraph(rng, w, 5),
        prose(rng, w, 2),
        prose(rng, w, 5),
        paragraph(rng, w, 4)
    );
    let round = b.tools(
        format!("Aku baca {file} dulu."),
        vec![Call::ok("read_attachment", J::Obj(vec![("file".into(), s(&file))]).compact(), text)],
    );
    b.message_mut(round.call).stage = Some(stage.to_string());
    b.message_mut(round.results[0]).stage = Some(stage.to_string());
    let note = b.push(staged(
        Message::assistant(format!(
            "Sudah aku baca. {} memakai {n_resp} responden; temuannya mendukung argumen kita tentang {}. Aku masukkan sebagai rujukan pendukung. {}",
            r.ay(),
            w.t.y,
            paragraph(rng, w, 2)
        )),
        stage,
    ));
    if b.count_probes(ProbeKind::Recall) < 6 {
        b.probe(
            ProbeKind::Recall,
            "uploaded-sample",
            q(
                format!("Berapa responden dalam jurnal {file} yang diunggah pengguna?"),
                format!("{n_resp} responden."),
                &[&[&format!("{n_resp} responden")]],
            ),
            note,
        );
    }
}
