from __future__ import annotations

from desk.natsserver import NatsServer
from shared import guidance
from shared.bus import Bus
from shared.guidance import Guidance, Instruction
from shared.streams import Topology, provision


async def test_a_reader_finds_the_bucket_once_it_exists_and_reads_every_change(
    nats_server: NatsServer,
) -> None:
    bus = await Bus.connect(nats_server.url, service="test")
    try:
        reader = guidance.Reader(bus.js)
        assert await reader.read() == Guidance()  # no bucket yet: no instructions, no error
        await provision(bus.js, Topology())
        assert await reader.read() == Guidance()  # a bucket without the value yet
        first = Guidance(instructions=[Instruction(id=1, category="billing", text="Be brief.")])
        await guidance.write(bus.js, first)
        assert await reader.read() == first
        second = Guidance(instructions=[Instruction(id=2, category="refund", text="Say sorry.")])
        await guidance.write(bus.js, second)
        assert await reader.read() == second
    finally:
        await bus.close()
