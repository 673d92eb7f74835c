"""strata-sidecar's Fork without child_id on a parent whose id has the longest allowed length (128
characters): the derived child id is cut to fit, so the child can be opened, joined and deleted
like any agent (it used to get 135 characters, which every later call refused)."""

from __future__ import annotations

import re

from sidecar_testing import pb

LONGEST = "p" * 123 + ".fork"  # 128 characters


def test_fork_of_a_parent_at_the_id_limit(start_sidecar):
    sidecar = start_sidecar([])
    stub = sidecar.stub()
    stub.CreateAgent(pb.CreateAgentRequest(agent_id=LONGEST, spec=pb.AgentSpec(
        system_prompts=["You split work into subtasks."])))
    stub.AppendUser(pb.AppendUserRequest(agent_id=LONGEST, content="Plan the work."))

    children = [stub.Fork(pb.ForkRequest(agent_id=LONGEST, task=f"Part {n}.")).agent_id
                for n in (1, 2)]
    assert children == ["p" * 121 + ".fork-1", "p" * 121 + ".fork-2"]
    for child in children:
        assert len(child) <= 128 and re.fullmatch(r"[A-Za-z0-9._-]+", child)
        assert stub.OpenAgent(pb.OpenAgentRequest(agent_id=child)).agent_id == child
    listed = [a.agent_id for a in stub.ListAgents(pb.ListAgentsRequest()).agents]
    assert sorted(listed) == sorted([LONGEST, *children])

    assert stub.Join(pb.JoinRequest(agent_id=LONGEST, child_id=children[0])).segment_id
    for child in children:
        stub.DeleteAgent(pb.DeleteAgentRequest(agent_id=child))
    listed = [a.agent_id for a in stub.ListAgents(pb.ListAgentsRequest()).agents]
    assert listed == [LONGEST]
