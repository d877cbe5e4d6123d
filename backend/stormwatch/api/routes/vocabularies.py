from fastapi import APIRouter

from stormwatch.api.deps import OrgPrincipalDep
from stormwatch.schemas.vocabularies import Vocabularies
from stormwatch.services.vocabularies import vocabularies

router = APIRouter(tags=["vocabularies"])


@router.get("/vocabularies", response_model=Vocabularies)
async def get_vocabularies(principal: OrgPrincipalDep) -> Vocabularies:
    """Every closed list of values the API accepts: what a client may offer for a choice."""
    return Vocabularies.model_validate(vocabularies())
