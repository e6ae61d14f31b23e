def test_serialize_%noun%_omits_internal_fields():
    data = serialize_%noun%(make_%noun%())
    assert "version" not in data
    assert set(data) == {"id", "%field%", "created_at", "updated_at"}
# ---
def test_validate_%noun%_requires_%field%():
    %noun% = make_%noun%(%field%="")
    assert validate_%noun%(%noun%) == ["%field% is required"]
# ---
@pytest.mark.parametrize("limit,offset,expected", [(10, 0, 10), (10, 95, 5), (50, 100, 0)])
def test_list_%noun%s_pages(db_session, limit, offset, expected):
    make_%noun%s(db_session, count=100)
    assert len(list_%noun%s(db_session, limit=limit, offset=offset)) == expected
# ---
def test_%noun%s_by_%field%_keeps_order():
    items = [make_%noun%(%field%="a"), make_%noun%(%field%="b"), make_%noun%(%field%="a")]
    grouped = %noun%s_by_%field%(items)
    assert [i.id for i in grouped["a"]] == [items[0].id, items[2].id]
# ---
def test_get_%noun%_missing_returns_none(db_session):
    assert get_%noun%(db_session, "does-not-exist") is None
# ---
def test_merge_%noun%_ignores_unknown_keys():
    %noun% = make_%noun%(%field%="old")
    merged = merge_%noun%_%field%(%noun%, {"%field%": "new", "bogus": 1})
    assert merged.%field% == "new"
    assert not hasattr(merged, "bogus")
# ---
@pytest.mark.asyncio
async def test_publish_%noun%_event_shapes_payload(fake_bus):
    %noun% = make_%noun%()
    await publish_%noun%_event(fake_bus, %noun%, "updated")
    (topic, event), = fake_bus.published
    assert event["type"] == "%noun%.updated"
    assert event["id"] == %noun%.id
# ---
def test_archive_%noun%s_dry_run_changes_nothing(db_session, frozen_clock):
    make_%noun%s(db_session, count=3, updated_days_ago=400)
    assert archive_%noun%s_older_than(db_session, 365, dry_run=True) == 3
    assert all(x.archived_at is None for x in list_%noun%s(db_session))