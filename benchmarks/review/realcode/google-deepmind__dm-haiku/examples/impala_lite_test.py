# Copyright 2020 DeepMind Technologies Limited. All Rights Reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# ==============================================================================
"""Tests for haiku.examples.impala_lite."""

from absl.testing import absltest
from examples import impala_lite


class ImpalaLiteTest(absltest.TestCase):

  def test_impala_integration(self):

    impala_lite.run(trajectories_per_actor=2, num_actors=2, unroll_len=20)

if __name__ == '__main__':
  absltest.main()
