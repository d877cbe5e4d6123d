"""The demo's storage targets are ones a user could create, priced by the shipped catalog,
with the variants the compression and replication advisors read."""

from stormwatch.devtools.demo import STORAGE, target_body
from stormwatch.schemas.storage_target import StorageTargetCreate
from stormwatch.services.advisors.catalog import SHIPPED, TARGET_PROVIDER

PRICED = {(f.provider, f.region) for f in SHIPPED if f.item == "storage_per_gb_month"}
AGENT = "00000000-0000-4000-8000-000000000001"


def test_every_demo_target_validates_and_names_a_region_the_catalog_prices() -> None:
    for p in STORAGE:
        body = StorageTargetCreate.model_validate(
            target_body(p, "http://127.0.0.1:9/x", AGENT, 20))
        assert (TARGET_PROVIDER[body.provider], body.region) in PRICED, (body.name, body.region)


def test_every_demo_target_probes_text_with_gzip9_and_the_replicated_variant() -> None:
    for p in STORAGE:
        body = StorageTargetCreate.model_validate(
            target_body(p, "http://127.0.0.1:9/x", AGENT, 20))
        assert "text" in body.contents and len(body.sizes_bytes.text) >= 2, body.name
        assert body.variants.gzip9.enabled and body.variants.gzip9.contents == ["text"]
        assert body.variants.replication.enabled and body.variants.replication.copies >= 2
