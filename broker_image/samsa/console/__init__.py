"""`samsa console`: a web console of any Kafka cluster, served by aiohttp as server-side HTML.

- `values`: how record keys, values and headers are shown (pure);
- `forms`: form and query input, parsed and checked (pure);
- `lag_history`: each group's lag over time, sampled while the console runs (pure);
- `cluster`: what the console reads from and writes to the cluster, through confluent-kafka;
- `pages`: the HTML templates;
- `app`: the routes, the read-only switch, the console's own login and its error pages.
"""
