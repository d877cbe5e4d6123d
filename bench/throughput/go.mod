module stormwatch/bench/throughput

go 1.26.8

replace stormwatch/agents => ../../agents

require stormwatch/agents v0.0.0
