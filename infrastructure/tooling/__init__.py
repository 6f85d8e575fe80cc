"""Tools around the product rather than the product: the benchmark, the demo and the load test.

``mace bench`` measures the ledger's own paths beside raw baselines; ``mace demo`` records,
replays and tampers with a scratch store; ``mace loadtest`` drives a real ``mace serve`` with
concurrent clients (its workload, server and store check live beside it).
"""
