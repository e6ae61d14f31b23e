def get_%noun%(session: Session, %noun%_id: str) -> %N% | None:
    """Fetch one %noun% by id, or None when it does not exist."""
    return session.get(%N%, %noun%_id)
# ---
def list_%noun%s(session: Session, *, limit: int = 50, offset: int = 0) -> list[%N%]:
    """Return %noun%s ordered by creation time, newest first."""
    stmt = select(%N%).order_by(%N%.created_at.desc()).offset(offset).limit(limit)
    return list(session.scalars(stmt))
# ---
def create_%noun%(session: Session, payload: %N%Create, *, actor: str) -> %N%:
    """Create a %noun% and record who did it."""
    %noun% = %N%(**payload.model_dump(), created_by=actor)
    session.add(%noun%)
    session.flush()
    log.info("created %noun% %s by %s", %noun%.id, actor)
    return %noun%
# ---
def _%field%_sort_key(%noun%: %N%) -> tuple[str, int]:
    return (%noun%.%field% or "", %noun%.version)
# ---
class %N%Repository:
    """Persistence for %noun%s. All methods expect an open transaction."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def by_%field%(self, value: str) -> list[%N%]:
        stmt = select(%N%).where(%N%.%field% == value).order_by(%N%.created_at)
        return list(self._session.scalars(stmt))

    def count_since(self, since: datetime) -> int:
        stmt = select(func.count()).select_from(%N%).where(%N%.created_at >= since)
        return int(self._session.scalar(stmt) or 0)
# ---
@dataclass(frozen=True)
class %N%Summary:
    id: str
    %field%: str
    total_minor: int
    currency: str = DEFAULT_CURRENCY

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "%N%Summary":
        return cls(
            id=str(row["id"]),
            %field%=row["%field%"],
            total_minor=int(row["total_minor"]),
            currency=row.get("currency", DEFAULT_CURRENCY),
        )
# ---
def validate_%noun%(%noun%: %N%) -> list[str]:
    """Return a list of validation problems; empty when the %noun% is valid."""
    problems: list[str] = []
    if not %noun%.%field%:
        problems.append("%field% is required")
    if %noun%.total_minor < 0:
        problems.append("total_minor must not be negative")
    if len(%noun%.reference or "") > MAX_REFERENCE_LEN:
        problems.append(f"reference longer than {MAX_REFERENCE_LEN} characters")
    return problems
# ---
def %noun%s_by_%field%(items: Iterable[%N%]) -> dict[str, list[%N%]]:
    """Group %noun%s by %field%, keeping input order inside each group."""
    grouped: dict[str, list[%N%]] = defaultdict(list)
    for item in items:
        grouped[item.%field%].append(item)
    return dict(grouped)
# ---
async def publish_%noun%_event(bus: EventBus, %noun%: %N%, kind: str) -> None:
    """Emit a %noun%.<kind> event; the bus retries on transient errors."""
    event = {
        "type": f"%noun%.{kind}",
        "id": %noun%.id,
        "occurred_at": utcnow().isoformat(),
        "data": serialize_%noun%(%noun%),
    }
    await bus.publish(TOPIC, event)
# ---
def serialize_%noun%(%noun%: %N%, *, include_internal: bool = False) -> dict[str, Any]:
    data = {
        "id": %noun%.id,
        "%field%": %noun%.%field%,
        "created_at": %noun%.created_at.isoformat(),
        "updated_at": %noun%.updated_at.isoformat(),
    }
    if include_internal:
        data["version"] = %noun%.version
        data["created_by"] = %noun%.created_by
    return data
# ---
def archive_%noun%s_older_than(session: Session, days: int, *, dry_run: bool = False) -> int:
    """Archive %noun%s whose last update is older than `days`; returns how many."""
    cutoff = utcnow() - timedelta(days=days)
    stmt = select(%N%).where(%N%.updated_at < cutoff, %N%.archived_at.is_(None))
    count = 0
    for %noun% in session.scalars(stmt):
        count += 1
        if not dry_run:
            %noun%.archived_at = utcnow()
    log.info("archived %d %noun%s (dry_run=%s)", count, dry_run)
    return count
# ---
def merge_%noun%_%field%(current: %N%, incoming: Mapping[str, Any]) -> %N%:
    """Apply a partial update; unknown keys are ignored, None clears a field."""
    allowed = {"%field%", "reference", "notes"}
    for key, value in incoming.items():
        if key not in allowed:
            log.debug("ignoring unknown %noun% field %s", key)
            continue
        setattr(current, key, value)
    current.version += 1
    return current