from __future__ import annotations

from desk.natsserver import NatsServer
from shared import standing
from shared.bus import Bus
from shared.standing import Instruction, StandingInstructions
from shared.streams import Topology, provision


async def test_a_reader_finds_the_bucket_once_it_exists_and_reads_every_change(
    nats_server: NatsServer,
) -> None:
    bus = await Bus.connect(nats_server.url, service="test")
    try:
        reader = standing.Reader(bus.js)
        assert (
            await reader.read() == StandingInstructions()
        )  # no bucket yet: no instructions, no error
        await provision(bus.js, Topology())
        assert await reader.read() == StandingInstructions()  # a bucket without the value yet
        first = StandingInstructions(
            instructions=[Instruction(id=1, category="billing", text="Be brief.")]
        )
        await standing.write(bus.js, first)
        assert await reader.read() == first
        second = StandingInstructions(
            instructions=[Instruction(id=2, category="refund", text="Say sorry.")]
        )
        await standing.write(bus.js, second)
        assert await reader.read() == second
    finally:
        await bus.close()
