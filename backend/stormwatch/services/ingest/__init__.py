"""Agent batch ingest, walked in order by `api/routes/ingest.py`:

1. `parse.decode_json` and `parse.parse_batch`: the body's JSON (repeated keys, non-finite
   numbers and bad text refused) and the columnar batch validated, vectorised with numpy.
2. `store.raw_retention_days` bounds how old a sample may be (parse's `Limits`).
3. `store.check_references`, `store.ensure_partitions`, `store.store_batch`: the ids a batch
   names are this org's (samples of deleted peers set aside), then one COPY transaction, so
   a batch is stored whole or not at all, once.
"""
